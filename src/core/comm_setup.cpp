#include "core/comm_setup.hpp"

#include <functional>

#include "bootstrap/tcp_store.hpp"
#include "common/socket.hpp"
#include "common/strings.hpp"
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

// Where this rank's data listener binds: the address of LOOM_SOCKET_IFNAME's (first) interface,
// else the local address the kernel routes to the rendezvous root with. (The tcp transport
// listens on the list's further interfaces too: transports/tcp/tcp_rails.hpp.)
Result<net::SocketAddress> data_bind_address(const config::Config& cfg,
                                             const net::SocketAddress& root) {
  const std::string list = cfg.get_string("LOOM_SOCKET_IFNAME");
  const std::vector<std::string_view> names = comma_tokens(list);
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress a, names.empty() ? net::local_address_towards(root)
                                                            : net::interface_address(names[0]));
  a.set_port(0);
  return a;
}

// While the job's first communicator is being created its ranks are the store's clients, each
// under its own rank: one that vanished without a goodbye died, and the others fail at once
// naming it instead of waiting for LOOM_TIMEOUT.
std::function<Status()> store_liveness(std::shared_ptr<bootstrap::Store> store, int rank,
                                       int nranks) {
  return [store = std::move(store), rank, nranks]() -> Status {
    auto gone = store->gone(Deadline::after(std::chrono::seconds(2)));
    if (!gone.is_ok()) return Status::ok();  // the waits report the store's own failure
    for (const bootstrap::GoneClient& g : *gone)
      if (g.rank >= 0 && g.rank < nranks && g.rank != rank)
        return make_error(ErrorCode::PeerFailed,
                          "rank {}: rank {} (host {}, pid {}) went away while the communicator "
                          "was being created: its connection to the rendezvous store closed "
                          "without a goodbye (the process died?)",
                          rank, g.rank, g.host, g.pid)
            .with_peer(g.rank);
    return Status::ok();
  };
}

}  // namespace

bootstrap::ServerOptions store_options(const config::Config& cfg) {
  bootstrap::ServerOptions o;
  if (cfg.has("LOOM_HELLO_TIMEOUT")) o.hello_timeout = cfg.get_duration("LOOM_HELLO_TIMEOUT");
  if (cfg.has("LOOM_STORE_QUOTA")) o.client_quota = cfg.get_size("LOOM_STORE_QUOTA");
  return o;
}

Result<std::unique_ptr<CommImpl>> join(const UniqueId& id, int rank, int nranks,
                                       config::Config cfg) {
  const auto joined = Clock::now();
  LOOM_RETURN_IF_ERROR(check_ranks(rank, nranks));
  LOOM_RETURN_IF_ERROR(log::configure(cfg));
  Deadline deadline = Deadline::after(cfg.get_duration("LOOM_TIMEOUT"));
  auto root = net::resolve(id.root_address());
  if (!root.is_ok())
    return root.status().with_context(fmt::format("rank {}: rendezvous address", rank));
  std::unique_ptr<bootstrap::TcpStoreServer> server;
  if (id.root_served_by_rank0() && rank == 0) {
    bootstrap::ServerOptions options = store_options(cfg);
    options.members = nranks;
    auto s = bootstrap::TcpStoreServer::start(*root, id.comm_id(), id.secret(), options);
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
  if (!client.is_ok()) {
    Status st = client.status().with_context(
        fmt::format("rank {}: joining the rendezvous at {}", rank, target.to_string()));
    if (st.code() == ErrorCode::PeerFailed && id.root_served_by_rank0() && rank != 0)
      st = Status(st.code(), st.message() + " [rank 0 serves the rendezvous: did it fail?]")
               .with_peer(0);
    return st;
  }
  client.value()->set_op_timeout(cfg.get_duration("LOOM_TIMEOUT"));
  LOOM_LOG_INFO(
      Bootstrap, "rank {} of {}: start-up phases (ms): joined the rendezvous at {} in {}", rank,
      nranks, target.to_string(),
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - joined).count());
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress bind, data_bind_address(cfg, target));
  std::shared_ptr<bootstrap::TcpStoreServer> serving(std::move(server));
  if (!serving) serving = store_served_here(id.comm_id());  // UniqueId::create() in this process
  std::shared_ptr<bootstrap::Store> store(std::move(client).value());
  CommSetup setup;
  setup.rank = rank;
  setup.nranks = nranks;
  setup.comm_id = id.comm_id();
  setup.store = store;
  setup.server = serving;
  setup.bind_address = bind;
  setup.config = std::move(cfg);
  setup.secret = id.secret();
  setup.liveness = store_liveness(store, rank, nranks);
  auto comm = CommImpl::create(std::move(setup));
  if (!comm.is_ok() && serving)  // the other ranks learn why the store goes away
    serving->set_closing_reason(
        fmt::format("rank {}, which serves it, failed: {}", rank, comm.status().message()));
  if (!comm.is_ok() && store->server_lost() && id.root_served_by_rank0() && rank != 0)
    return Status(comm.status().code(),
                  comm.status().message() +
                      " [rank 0 served the rendezvous store: it died while the communicator was "
                      "being created]")
        .with_peer(0);
  return comm;
}

Result<std::unique_ptr<CommImpl>> join_store(std::shared_ptr<bootstrap::Store> store, int rank,
                                             int nranks, std::uint64_t comm_id,
                                             const std::string& bind_host, config::Config cfg) {
  LOOM_RETURN_IF_ERROR(check_ranks(rank, nranks));
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress bind, net::resolve(bind_host));
  bind.set_port(0);
  CommSetup setup;
  setup.rank = rank;
  setup.nranks = nranks;
  setup.comm_id = comm_id;
  setup.store = std::move(store);
  setup.bind_address = bind;
  setup.config = std::move(cfg);
  return CommImpl::create(std::move(setup));
}

}  // namespace loom::detail
