#include "core/comm_impl.hpp"

#include <sched.h>

#include <cstdlib>
#include <cstring>

#include "algorithms/ring.hpp"
#include "core/collective_task.hpp"
#include "log/log.hpp"

namespace loom::detail {

Result<CommSettings> CommSettings::from(const config::Config& cfg) {
  CommSettings s;
  s.timeout = cfg.get_duration("LOOM_TIMEOUT");
  s.chunk_bytes = cfg.get_size("LOOM_CHUNK_SIZE");
  s.depth = static_cast<std::size_t>(cfg.get_int("LOOM_PIPELINE_DEPTH"));
  s.spin = std::chrono::microseconds(cfg.get_int("LOOM_SPIN_US"));  // < 0: chosen at init
  s.tcp.sockets_per_peer = static_cast<int>(cfg.get_int("LOOM_SOCKETS_PER_PEER"));
  s.tcp.socket_buffer = cfg.get_size("LOOM_SOCKET_BUFFER");
  s.algo = cfg.get_string("LOOM_ALGO");
  if (s.timeout.count() <= 0)
    return make_error(ErrorCode::InvalidUsage, "LOOM_TIMEOUT must be positive");
  if (s.chunk_bytes < 64 || s.chunk_bytes > (1ull << 30))
    return make_error(ErrorCode::InvalidUsage, "LOOM_CHUNK_SIZE={} is outside [64, 1G]",
                      s.chunk_bytes);
  if (s.depth < 1 || s.depth > 64)
    return make_error(ErrorCode::InvalidUsage, "LOOM_PIPELINE_DEPTH={} is outside [1, 64]",
                      s.depth);
  if (s.tcp.sockets_per_peer < 1 || s.tcp.sockets_per_peer > 16)
    return make_error(ErrorCode::InvalidUsage, "LOOM_SOCKETS_PER_PEER={} is outside [1, 16]",
                      s.tcp.sockets_per_peer);
  if (s.algo != "auto" && s.algo != "ring")
    return make_error(ErrorCode::InvalidUsage, "LOOM_ALGO='{}' is not one of: auto, ring", s.algo);
  return s;
}

Result<std::unique_ptr<CommImpl>> CommImpl::create(CommSetup setup) {
  log::configure(setup.config);
  for (const auto& name : setup.config.unknown_variables())
    LOOM_LOG_WARN(Config, "ignoring unknown setting {} (run loom-info for the list)", name);
  LOOM_ASSIGN_OR_RETURN(CommSettings settings, CommSettings::from(setup.config));
  LOOM_ASSIGN_OR_RETURN(
      auto tcp, transport::tcp::TcpTransport::listen(setup.rank, setup.nranks, setup.comm_id,
                                                     setup.bind_address, settings.tcp));
  std::unique_ptr<CommImpl> comm(new CommImpl(std::move(setup), settings, std::move(tcp)));
  Status st = comm->rendezvous(Deadline::after(settings.timeout));
  if (!st.is_ok()) return st;
  return comm;
}

CommImpl::CommImpl(CommSetup setup, CommSettings settings,
                   std::unique_ptr<transport::tcp::TcpTransport> tcp)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      comm_id_(setup.comm_id),
      config_(std::move(setup.config)),
      settings_(settings),
      store_(std::move(setup.store)),
      server_(std::move(setup.server)),
      tcp_(std::move(tcp)) {
  exec::EngineOptions eo;
  eo.spin = settings_.spin;
  eo.name = fmt::format("rank {}", rank_);
  engine_ = std::make_unique<exec::Engine>(eo);
}

CommImpl::~CommImpl() {
  engine_.reset();
}

// Exchanges listening addresses, connects the ring neighbours, and makes sure every rank is done
// with the store before rank 0 (which may host it) can go away.
Status CommImpl::rendezvous(Deadline deadline) {
  const std::string prefix = fmt::format("loom/{:016x}/", comm_id_);
  const net::SocketAddress& me = tcp_->address();
  auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(&me), sizeof me);
  LOOM_ASSIGN_OR_RETURN(auto all, bootstrap::store_allgather(*store_, prefix + "addr", rank_,
                                                             nranks_, bytes, deadline));
  std::vector<net::SocketAddress> addrs(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].size() != sizeof(net::SocketAddress))
      return make_error(ErrorCode::Mismatch, "rank {}: rank {} published a malformed address",
                        rank_, i);
    std::memcpy(&addrs[i], all[i].data(), sizeof(net::SocketAddress));
  }
  tcp_->set_peer_addresses(std::move(addrs));
  if (nranks_ > 1) {
    std::vector<int> ring = {(rank_ + 1) % nranks_, (rank_ + nranks_ - 1) % nranks_};
    LOOM_RETURN_IF_ERROR(tcp_->ensure(ring, deadline));
  }
  LOOM_RETURN_IF_ERROR(
      bootstrap::store_barrier(*store_, prefix + "init", rank_, nranks_, deadline));
  if (rank_ != 0) {
    LOOM_ASSIGN_OR_RETURN(std::int64_t acked, store_->add(prefix + "acked", 1));
    if (acked == nranks_ - 1) LOOM_RETURN_IF_ERROR(store_->set(prefix + "acked/all", {}));
  } else if (nranks_ > 1) {
    LOOM_RETURN_IF_ERROR(store_->get(prefix + "acked/all", deadline).status());
  }
  LOOM_LOG_INFO(Init, "rank {} of {}: communicator {:016x} ready, listening on {}", rank_, nranks_,
                comm_id_, me.to_string());
  return Status::ok();
}

Status CommImpl::connect(const std::vector<int>& peers, Deadline deadline) {
  return tcp_->ensure(peers, deadline);
}

transport::Connection* CommImpl::connection(int peer) const {
  return tcp_->get(peer);
}

std::uint8_t* CommImpl::scratch(std::size_t bytes) {
  if (bytes > scratch_bytes_) {
    std::size_t rounded = (bytes + 4095) & ~std::size_t{4095};
    scratch_ = {static_cast<std::uint8_t*>(std::aligned_alloc(4096, rounded)), &std::free};
    scratch_bytes_ = scratch_ ? rounded : 0;
  }
  return scratch_.get();
}

algo::Plan CommImpl::make_plan(const core::OpDesc& op) const {
  if (op.kind == core::CollKind::Barrier) return algo::dissemination_barrier(rank_, nranks_);
  algo::RingParams p;
  p.rank = rank_;
  p.nranks = nranks_;
  p.count = op.count;
  p.elem_size = dtype_size(op.dtype);
  p.chunk_bytes = settings_.chunk_bytes;
  p.depth = settings_.depth;
  p.in_place = op.in_place(rank_);
  p.root = op.root;
  switch (op.kind) {
    case core::CollKind::AllReduce: return algo::ring_allreduce(p);
    case core::CollKind::AllGather: return algo::ring_allgather(p);
    case core::CollKind::ReduceScatter: return algo::ring_reduce_scatter(p);
    case core::CollKind::Broadcast: return algo::chain_broadcast(p);
    case core::CollKind::Reduce: return algo::chain_reduce(p);
    case core::CollKind::Barrier: break;
  }
  return {};
}

Work CommImpl::submit(core::OpDesc op, const CollOptions& opts) {
  throw_if_error(engine_->failure());
  op.seq = next_seq_++;
  throw_if_error(core::validate(op, rank_, nranks_));
  algo::Plan plan =
      op.count == 0 && op.kind != core::CollKind::Barrier ? algo::Plan{} : make_plan(op);
  if (plan.steps.empty()) {
    auto done = std::make_shared<OpState>();
    done->done = true;
    return Work(done);
  }
  Deadline deadline = Deadline::after(opts.timeout.value_or(settings_.timeout));
  LOOM_LOG_DEBUG(Coll, "rank {}: {} as {} ({} steps)", rank_, core::describe(op), plan.algorithm,
                 plan.steps.size());
  return Work(
      engine_->submit(std::make_unique<CollectiveTask>(*this, op, std::move(plan), deadline)));
}

}  // namespace loom::detail
