#include "core/comm_setup.hpp"

#include "bootstrap/tcp_store.hpp"
#include "common/socket.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

Status check_ranks(int rank, int nranks) {
  if (nranks < 1)
    return make_error(ErrorCode::InvalidArgument, "nranks {} must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return make_error(ErrorCode::InvalidArgument, "rank {} is outside [0, {})", rank, nranks);
  return Status::ok();
}

// Where this rank's data listener binds: LOOM_SOCKET_IFNAME's address, else the local address
// the kernel routes to the rendezvous root with.
Result<net::SocketAddress> data_bind_address(const config::Config& cfg,
                                             const net::SocketAddress& root) {
  std::string ifname = cfg.get_string("LOOM_SOCKET_IFNAME");
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress a, ifname.empty() ? net::local_address_towards(root)
                                                             : net::interface_address(ifname));
  a.set_port(0);
  return a;
}

}  // namespace

Result<std::unique_ptr<CommImpl>> join(const UniqueId& id, int rank, int nranks,
                                       config::Config cfg) {
  LOOM_RETURN_IF_ERROR(check_ranks(rank, nranks));
  LOOM_RETURN_IF_ERROR(log::configure(cfg));
  Deadline deadline = Deadline::after(cfg.get_duration("LOOM_TIMEOUT"));
  auto root = net::resolve(id.root_address());
  if (!root.is_ok())
    return root.status().with_context(fmt::format("rank {}: rendezvous address", rank));
  std::unique_ptr<bootstrap::TcpStoreServer> server;
  if (id.root_served_by_rank0() && rank == 0) {
    auto s = bootstrap::TcpStoreServer::start(*root, id.comm_id(), id.secret());
    if (!s.is_ok())
      return s.status().with_context(
          fmt::format("rank 0: starting the rendezvous server at {}", id.root_address()));
    server = std::move(s).value();
    LOOM_LOG_INFO(Bootstrap, "rank 0: rendezvous server listening on {}",
                  server->address().to_string());
  }
  const net::SocketAddress target = server ? server->address() : *root;
  auto client =
      bootstrap::TcpStoreClient::connect(target, id.comm_id(), rank, deadline, id.secret());
  if (!client.is_ok())
    return client.status().with_context(
        fmt::format("rank {}: joining the rendezvous at {}", rank, target.to_string()));
  client.value()->set_op_timeout(cfg.get_duration("LOOM_TIMEOUT"));
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress bind, data_bind_address(cfg, target));
  std::shared_ptr<bootstrap::TcpStoreServer> serving(std::move(server));
  if (!serving) serving = store_served_here(id.comm_id());  // UniqueId::create() in this process
  CommSetup setup{rank,
                  nranks,
                  id.comm_id(),
                  std::shared_ptr<bootstrap::Store>(std::move(client).value()),
                  std::move(serving),
                  bind,
                  std::move(cfg),
                  id.secret()};
  return CommImpl::create(std::move(setup));
}

Result<std::unique_ptr<CommImpl>> join_store(std::shared_ptr<bootstrap::Store> store, int rank,
                                             int nranks, std::uint64_t comm_id,
                                             const std::string& bind_host, config::Config cfg) {
  LOOM_RETURN_IF_ERROR(check_ranks(rank, nranks));
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress bind, net::resolve(bind_host));
  bind.set_port(0);
  CommSetup setup{rank, nranks, comm_id, std::move(store), nullptr, bind, std::move(cfg)};
  return CommImpl::create(std::move(setup));
}

}  // namespace loom::detail
