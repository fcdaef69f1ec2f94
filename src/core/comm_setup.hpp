// Joining a job: from a UniqueId (or a bootstrap store, in tests) to a ready CommImpl.
#pragma once

#include <memory>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "config/config.hpp"
#include "core/comm_impl.hpp"
#include "loom/unique_id.hpp"

namespace loom::detail {

/// The rendezvous server's limits, from LOOM_HELLO_TIMEOUT and LOOM_STORE_QUOTA.
bootstrap::ServerOptions store_options(const config::Config& cfg);

/// Connects to the rendezvous named by `id` (rank 0 starts it when the id says so), then
/// creates the communicator.
Result<std::unique_ptr<CommImpl>> join(const UniqueId& id, int rank, int nranks,
                                       config::Config cfg);

/// The rendezvous server UniqueId::create() started in this process for `comm_id` (null if
/// none): its communicators know their process serves the store (failure attribution, shrink).
std::shared_ptr<bootstrap::TcpStoreServer> store_served_here(std::uint64_t comm_id);

/// Creates a communicator over an existing store (threads-as-ranks tests use an InMemoryStore).
/// Data connections listen on `bind_host` (e.g. "127.0.0.1").
Result<std::unique_ptr<CommImpl>> join_store(std::shared_ptr<bootstrap::Store> store, int rank,
                                             int nranks, std::uint64_t comm_id,
                                             const std::string& bind_host, config::Config cfg);

}  // namespace loom::detail
