#include "core/comm_impl.hpp"

#include <sched.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>

#include "algorithms/ring.hpp"
#include "core/collective_task.hpp"
#include "core/job_layout.hpp"
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
  s.shm.slot_bytes = cfg.get_size("LOOM_SHM_SLOT_SIZE");
  s.shm.nslots = static_cast<std::size_t>(cfg.get_int("LOOM_SHM_SLOTS"));
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

namespace {

// Spinning only pays when every rank of this host has a CPU of its own; otherwise a spinning
// rank steals the CPU that the rank it waits for needs.
std::chrono::microseconds choose_spin(std::chrono::microseconds configured, int ranks_on_host) {
  if (configured.count() >= 0) return configured;
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::chrono::microseconds(ranks_on_host <= cpus ? 20 : 0);
}

}  // namespace

Result<std::unique_ptr<CommImpl>> CommImpl::create(CommSetup setup) {
  log::configure(setup.config);
  for (const auto& name : setup.config.unknown_variables())
    LOOM_LOG_WARN(Config, "ignoring unknown setting {} (run loom-info for the list)", name);
  LOOM_ASSIGN_OR_RETURN(CommSettings settings, CommSettings::from(setup.config));
  settings.tcp.secret = setup.secret;
  LOOM_ASSIGN_OR_RETURN(auto tcp, transport::tcp::TcpTransport::listen(
                                      setup.rank, setup.nranks, setup.comm_id,
                                      setup.bind_address, settings.tcp));
  std::unique_ptr<CommImpl> comm(new CommImpl(std::move(setup), settings));
  LOOM_RETURN_IF_ERROR(comm->init(std::move(tcp), Deadline::after(settings.timeout)));
  return comm;
}

CommImpl::CommImpl(CommSetup setup, CommSettings settings)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      comm_id_(setup.comm_id),
      config_(std::move(setup.config)),
      settings_(settings),
      store_(std::move(setup.store)),
      server_(std::move(setup.server)) {}

CommImpl::~CommImpl() {
  // Drain first (a peer's failure, reported by the monitor, still fails what hangs), then stop
  // the monitor (it finishes a pending hang report), then the engine.
  if (engine_) engine_->drain();
  if (monitor_ && !aborted_.load()) {
    monitor_->mark_left();
    monitor_->stop();
  }
  engine_.reset();
}

// Learns the job's layout, sets up the transports it needs, connects the ring neighbours, and
// starts the engine.
Status CommImpl::init(std::unique_ptr<transport::tcp::TcpTransport> tcp, Deadline deadline) {
  const std::string prefix = fmt::format("loom/{:016x}/", comm_id_);
  LOOM_ASSIGN_OR_RETURN(JobLayout layout, exchange_layout(*store_, prefix, rank_, nranks_,
                                                          config_, tcp->address(), deadline));
  tcp->set_peer_addresses(layout.tcp_addresses);
  data_address_ = tcp->address();
  std::unique_ptr<transport::shm::ShmTransport> shm;
  for (TransportKind k : layout.transport_of)
    if (k == TransportKind::Shm && !shm) {
      LOOM_ASSIGN_OR_RETURN(shm, transport::shm::ShmTransport::create(rank_, nranks_, comm_id_,
                                                                      store_, settings_.shm));
    }
  transports_ = std::make_unique<PeerTransports>(rank_, layout.transport_of, std::move(tcp),
                                                 std::move(shm));
  ring_ = layout.ring;
  if (nranks_ > 1) {
    auto pos = static_cast<std::size_t>(std::find(ring_.begin(), ring_.end(), rank_) - ring_.begin());
    std::size_t n = ring_.size();
    LOOM_RETURN_IF_ERROR(transports_->ensure({ring_[(pos + 1) % n], ring_[(pos + n - 1) % n]}, deadline));
  }
  LOOM_RETURN_IF_ERROR(finish_rendezvous(*store_, prefix, rank_, nranks_, deadline));
  settings_.spin = choose_spin(settings_.spin, layout.ranks_on_my_host(rank_));
  exec::EngineOptions eo;
  eo.spin = settings_.spin;
  eo.name = fmt::format("rank {}", rank_);
  eo.on_failure = [this](const Status& why) {
    return monitor_ ? monitor_->local_failure(why) : why;
  };
  engine_ = std::make_unique<exec::Engine>(eo);
  LOOM_RETURN_IF_ERROR(start_monitor(layout, deadline));
  LOOM_LOG_INFO(Init, "rank {} of {}: communicator {:016x} ready ({} ranks on this host, spin {} us)",
                rank_, nranks_, comm_id_, layout.ranks_on_my_host(rank_), settings_.spin.count());
  return Status::ok();
}

Status CommImpl::connect(const std::vector<int>& peers, Deadline deadline) {
  return transports_->ensure(peers, deadline);
}

transport::Connection* CommImpl::connection(int peer) const { return transports_->get(peer); }

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
  p.order = ring_;
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
  if (aborted_.load())
    throw Error(ErrorCode::Aborted, fmt::format("rank {}: the communicator was aborted", rank_));
  throw_if_error(engine_->failure());
  if (Status remote = monitor_->first_failure(); !remote.is_ok()) throw_if_error(remote);
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
  {
    std::lock_guard lk(progress_mu_);
    unfinished_.emplace_back(op.seq, core::describe(op));
  }
  return Work(
      engine_->submit(std::make_unique<CollectiveTask>(*this, op, std::move(plan), deadline)));
}

}  // namespace loom::detail
