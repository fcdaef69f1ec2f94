#include "core/comm_impl.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "algorithms/factory.hpp"
#include "core/collective_task.hpp"
#include "core/job_layout.hpp"
#include "core/status_signal.hpp"
#include "log/log.hpp"
#include "topology/cpu_binding.hpp"
#include "transports/shm/shm_factory.hpp"
#include "transports/tcp/tcp_factory.hpp"

namespace loom::detail {

Result<CommSettings> CommSettings::from(const config::Config& cfg) {
  CommSettings s;
  s.timeout = cfg.get_duration("LOOM_TIMEOUT");
  s.check_calls_after = cfg.get_duration("LOOM_MISMATCH_CHECK_AFTER");
  LOOM_ASSIGN_OR_RETURN(s.chunk_bytes, select::chunk_from(cfg));
  s.depth = static_cast<std::size_t>(cfg.get_int("LOOM_PIPELINE_DEPTH"));
  s.spin = std::chrono::microseconds(cfg.get_int("LOOM_SPIN_US"));    // < 0: chosen at init
  s.yield = std::chrono::microseconds(cfg.get_int("LOOM_YIELD_US"));  // < 0: chosen at init
  s.tcp = transport::tcp::options_from(cfg);
  LOOM_ASSIGN_OR_RETURN(s.shm, transport::shm::options_from(cfg));  // auto values: at init
  s.algo = cfg.get_string("LOOM_ALGO");
  s.device = cfg.get_string("LOOM_DEVICE");
  LOOM_ASSIGN_OR_RETURN(s.ofi_hmem, parse_ofi_hmem(cfg.get_string("LOOM_OFI_HMEM")));
  if (s.timeout.count() <= 0)
    return make_error(ErrorCode::InvalidUsage, "LOOM_TIMEOUT must be positive");
  if (s.check_calls_after.count() < 0 || s.check_calls_after > std::chrono::hours(1))
    return make_error(ErrorCode::InvalidUsage, "LOOM_MISMATCH_CHECK_AFTER={} ms is outside [0, 1h]",
                      s.check_calls_after.count());
  if (s.depth < 1 || s.depth > 64)
    return make_error(ErrorCode::InvalidUsage, "LOOM_PIPELINE_DEPTH={} is outside [1, 64]",
                      s.depth);
  LOOM_RETURN_IF_ERROR(transport::tcp::check_options(s.tcp));
  LOOM_ASSIGN_OR_RETURN(s.policy, select::Policy::parse(s.algo));
  LOOM_ASSIGN_OR_RETURN(s.tuning, select::tuning_from(cfg));
  s.deterministic = cfg.get_bool("LOOM_DETERMINISTIC");
  return s;
}

namespace {

// How many ranks share this rank's busiest CPU: from the ranks' bindings, or, when one is
// unknown, this host's ranks over the CPUs this process may use.
double my_cpu_load(const JobLayout& layout, int rank) {
  const double load = topo::cpu_load(layout.topology, rank);
  if (load > 0) return load;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return static_cast<double>(layout.ranks_on_my_host(rank)) / std::max(cpus, 1);
}

// The busiest CPU of this rank's host: above 1 when any of its ranks shares a CPU (unknown
// bindings: this host's ranks over the CPUs this process may use, as for one rank).
double host_cpu_load(const JobLayout& layout, int rank) {
  const double load = topo::host_cpu_load(layout.topology, rank);
  return load > 0 ? load : my_cpu_load(layout, rank);
}

// Spinning only pays when this rank has a CPU of its own; otherwise a spinning rank steals the
// CPU that the rank it waits for needs.
std::chrono::microseconds choose_spin(std::chrono::microseconds configured, double cpu_load) {
  if (configured.count() >= 0) return configured;
  return std::chrono::microseconds(cpu_load <= 1 ? 20 : 0);
}

}  // namespace

Result<std::unique_ptr<CommImpl>> CommImpl::create(CommSetup setup) {
  LOOM_RETURN_IF_ERROR(log::configure(setup.config));
  for (const auto& name : setup.config.unknown_variables())
    LOOM_LOG_WARN(Config, "ignoring unknown setting {} (run loom-info for the list)", name);
  LOOM_ASSIGN_OR_RETURN(CommSettings settings, CommSettings::from(setup.config));
  settings.tcp.secret = setup.secret;
  LOOM_ASSIGN_OR_RETURN(
      auto tcp, transport::tcp::TcpTransport::listen(setup.rank, setup.nranks, setup.comm_id,
                                                     setup.bind_address, settings.tcp));
  std::unique_ptr<CommImpl> comm(new CommImpl(std::move(setup), settings));
  if (Status st = comm->init(std::move(tcp), Deadline::after(settings.timeout)); !st.is_ok()) {
    // A peer died during setup: what it named in /dev/shm goes now, not with the next job (twice:
    // its store connection may close a moment before its process is provably gone).
    if (st.code() == ErrorCode::PeerFailed)
      for (int i = 0; i < 2; ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        transport::shm::remove_orphans(comm->rank_, comm->comm_id_);
      }
    return st;
  }
  register_for_status(comm.get());
  if (comm->config_.get_bool("LOOM_STATUS_SIGNAL")) enable_status_signal();
  return comm;
}

CommImpl::CommImpl(CommSetup setup, CommSettings settings)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      comm_id_(setup.comm_id),
      config_(std::move(setup.config)),
      settings_(std::move(settings)),
      store_(std::move(setup.store)),
      server_(std::move(setup.server)),
      liveness_(std::move(setup.liveness)) {}

// Learns the job's layout, sets up the transports it needs, connects the ring neighbours, and
// starts the engine. A rank that fails on the way tells the others at the closing rendezvous, so
// they fail with its reason at once (rank 0, which checks no setting, would otherwise wait there
// until LOOM_TIMEOUT for a rank that found the plan settings differ).
Status CommImpl::init(std::unique_ptr<transport::tcp::TcpTransport> tcp, Deadline deadline) {
  const std::string prefix = fmt::format("loom/{:016x}/", comm_id_);
  LOOM_ASSIGN_OR_RETURN(JobLayout layout, exchange_layout(*store_, prefix, rank_, nranks_, config_,
                                                          tcp->address(), deadline, liveness_));
  if (Status st = connect(std::move(tcp), layout, prefix, deadline); !st.is_ok()) {
    (void)bootstrap::store_barrier_fail(*store_, rendezvous_name(prefix), rank_, st);
    return st;
  }
  LOOM_RETURN_IF_ERROR(finish_rendezvous(*store_, prefix, rank_, nranks_, deadline, liveness_));
  settings_.spin = choose_spin(settings_.spin, my_cpu_load(layout, rank_));
  if (settings_.yield.count() < 0) settings_.yield = select::kAutoYield;
  exec::EngineOptions eo;
  eo.spin = settings_.spin;
  eo.yield = settings_.yield;
  eo.name = fmt::format("rank {}", rank_);
  eo.on_failure = [this](const Status& why) {
    note_failed_peer(why);
    return monitor_ ? monitor_->local_failure(why) : why;
  };
  eo.idle_check = [this] { return check_unread_messages(); };
  engine_ = std::make_unique<exec::Engine>(eo);
  LOOM_RETURN_IF_ERROR(start_monitor(layout, deadline));
  liveness_ = nullptr;  // the failure monitor watches the ranks from now on
  LOOM_LOG_INFO(Init,
                "rank {} of {}: communicator {:016x} ready ({} ranks on this host, spin {} us, "
                "yield {} us)",
                rank_, nranks_, comm_id_, layout.ranks_on_my_host(rank_), settings_.spin.count(),
                settings_.yield.count());
  return Status::ok();
}

// The transports, the ring neighbours' connections, the plan settings' agreement and the device
// paths.
Status CommImpl::connect(std::unique_ptr<transport::tcp::TcpTransport> tcp, const JobLayout& layout,
                         const std::string& prefix, Deadline deadline) {
  tcp->set_peer_addresses(layout.tcp_addresses);
  tcp->set_ranks_on_host(layout.ranks_on_my_host(rank_));
  data_address_ = tcp->address();
  transport::CreateContext ctx;  // what the other transports are created from (registry)
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.comm_id = comm_id_;
  ctx.store = store_;
  ctx.config = &config_;
  ctx.data_address = tcp->address();
  ctx.secret = settings_.tcp.secret;
  ctx.ranks_on_host = layout.ranks_on_my_host(rank_);
  ctx.cpu_load = my_cpu_load(layout, rank_);
  ctx.host_cpu_load = host_cpu_load(layout, rank_);
  ctx.peer_addresses = layout.tcp_addresses;
  ctx.peer_check = [this](int peer) { return known_failure(peer); };
  // A ring's send waits for its receiver only if single copy; when a neighbour shares a CPU,
  // that wait holds the sender too, even one with a CPU of its own (3 ranks on 2 CPUs, 8 MiB:
  // 7.2-9.2 ms with the lone rank's sends single copy, 4.4-4.8 buffered).
  const bool shm_used = std::any_of(layout.transport_of.begin(), layout.transport_of.end(),
                                    [](TransportKind k) { return k == TransportKind::Shm; });
  if (shm_used && settings_.shm.single_copy_min == 0)
    settings_.buffered_ring_sends = ctx.host_cpu_load > 1;
  std::vector<std::unique_ptr<transport::Transport>> made;
  made.push_back(std::move(tcp));  // listening since before the layout exchange
  LOOM_ASSIGN_OR_RETURN(transports_,
                        PeerTransports::create(ctx, layout.transport_of, std::move(made)));
  ring_ = layout.ring;
  describe_shape(layout);
  if (nranks_ > 1) {
    auto pos =
        static_cast<std::size_t>(std::find(ring_.begin(), ring_.end(), rank_) - ring_.begin());
    std::size_t n = ring_.size();
    LOOM_RETURN_IF_ERROR(
        transports_->ensure({ring_[(pos + 1) % n], ring_[(pos + n - 1) % n]}, deadline));
  }
  if (settings_.chunk_bytes == 0) settings_.chunk_bytes = select::auto_chunk_bytes(layout.any_ofi);
  LOOM_ASSIGN_OR_RETURN(device::Device * dev, device::device_by_name(settings_.device));
  LOOM_RETURN_IF_ERROR(agree_on_plan_settings(prefix, dev, deadline));
  costs_ =
      select::CostTable::build(shape_, settings_.tuning, {settings_.chunk_bytes, settings_.depth});
  LOOM_RETURN_IF_ERROR(init_direct_path(dev, layout, prefix, deadline));
  if (dev) stream_path_ = std::make_unique<device::StreamPath>(*dev, settings_.timeout);
  return Status::ok();
}

// Device buffers go over cuda_ipc inside a host and, when every rank can send them from device
// memory, over ofi across hosts (see device/direct_path.hpp); otherwise they are staged.
Status CommImpl::init_direct_path(device::Device* dev, const JobLayout& layout,
                                  const std::string& prefix, Deadline deadline) {
  if (!dev) return Status::ok();
  std::vector<std::string> hosts;
  for (const auto& ri : layout.topology.ranks) hosts.push_back(ri.host_id);
  LOOM_ASSIGN_OR_RETURN(bool allowed, cuda_ipc_allowed(config_.get_string("LOOM_TRANSPORTS")));
  transport::ConnectionSet* network = nullptr;
  if (std::any_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h != hosts.front(); })) {
    NetDeviceVote mine = vote_network_device(*dev, *transports_, hosts, rank_, settings_.ofi_hmem);
    LOOM_ASSIGN_OR_RETURN(bool all,
                          agree_network_device(*store_, prefix, rank_, nranks_, mine, deadline));
    if (!all) return Status::ok();  // staged
    network = transports_.get();
  }
  transport::cuda_ipc::CudaIpcSetup setup;
  setup.dev = dev;
  setup.store = store_;
  setup.prefix = prefix;
  setup.comm_id = comm_id_;
  setup.rank = rank_;
  setup.allowed = allowed;
  setup.host_ids = std::move(hosts);
  setup.nvml_library = config_.get_string("LOOM_NVML_LIBRARY");
  LOOM_ASSIGN_OR_RETURN(direct_, device::DirectPath::create(std::move(setup), network, deadline));
  return Status::ok();
}

Status CommImpl::connect(const std::vector<int>& peers, Deadline deadline) {
  return transports_->ensure(peers, deadline);
}

transport::Connection* CommImpl::connection(int peer) const {
  return transports_->get(peer);
}

std::uint8_t* CommImpl::scratch(std::size_t bytes) {
  if (bytes > scratch_bytes_) {
    std::size_t rounded = (bytes + 4095) & ~std::size_t{4095};
    scratch_ = {static_cast<std::uint8_t*>(std::aligned_alloc(4096, rounded)), &std::free};
    scratch_bytes_ = scratch_ ? rounded : 0;
  }
  return scratch_.get();
}

// Every rank must build matching plans, so the settings that shape them must be equal: rank 0
// publishes its values and every other rank compares (one store read per rank).
Status CommImpl::agree_on_plan_settings(const std::string& prefix, const device::Device* dev,
                                        Deadline deadline) {
  const std::vector<std::string> mine = {
      // Device setup is collective: a rank without the others' runtime would wait for them.
      fmt::format("device runtime (LOOM_DEVICE)={}", dev ? dev->name() : "none"),
      fmt::format("LOOM_ALGO={}", settings_.algo),
      fmt::format("LOOM_DETERMINISTIC={}", settings_.deterministic ? 1 : 0),
      fmt::format("LOOM_CHUNK_SIZE={}", settings_.chunk_bytes),
      fmt::format("LOOM_PIPELINE_DEPTH={}", settings_.depth),
      fmt::format("LOOM_TUNING={}", settings_.tuning.to_string())};
  std::string text;
  for (const auto& m : mine) text += m + "\n";
  const std::string key = prefix + "plan_settings";
  if (rank_ == 0)
    return store_->set(key, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  LOOM_ASSIGN_OR_RETURN(bootstrap::Bytes theirs,
                        bootstrap::store_get_checked(*store_, key, deadline, liveness_));
  std::string root(theirs.begin(), theirs.end());
  if (root == text) return Status::ok();
  std::string diff;
  for (const auto& m : mine)
    if (root.find(m + "\n") == std::string::npos) {
      std::string name = m.substr(0, m.find('='));
      std::size_t at = root.find(name + "=");
      std::string other = at == std::string::npos ? "?" : root.substr(at, root.find('\n', at) - at);
      diff += fmt::format("{}{} here but {} on rank 0", diff.empty() ? "" : "; ", m, other);
    }
  return make_error(ErrorCode::InvalidUsage,
                    "rank {}: settings that shape collective plans differ between ranks ({}); "
                    "set them equally on every rank",
                    rank_, diff);
}

// The job's shape for the cost model and the per-host trees: hosts in ring order, each host's
// ranks in ring order.
void CommImpl::describe_shape(const JobLayout& layout) {
  const topo::Topology& t = layout.topology;
  std::vector<int> host_index(static_cast<std::size_t>(t.nhosts()), -1);
  for (int r : ring_) {
    int h = t.host_of(r);
    if (h < 0) h = 0;
    if (host_index[static_cast<std::size_t>(h)] < 0) {
      host_index[static_cast<std::size_t>(h)] = static_cast<int>(hosts_.size());
      hosts_.emplace_back();
    }
    hosts_[static_cast<std::size_t>(host_index[static_cast<std::size_t>(h)])].push_back(r);
  }
  shape_.nranks = nranks_;
  shape_.nhosts = static_cast<int>(hosts_.size());
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    shape_.per_host = std::max(shape_.per_host, static_cast<int>(hosts_[h].size()));
    int pus = t.hosts.size() > h ? t.hosts[h].pus : 0;
    if (pus > 0) shape_.cores = shape_.cores == 0 ? pus : std::min(shape_.cores, pus);
  }
}

void CommImpl::log_decision(const coll::OpDesc& op, const select::Decision& d, std::size_t bytes) {
  std::uint64_t size_class = 0;
  while ((std::size_t{1} << size_class) < bytes) ++size_class;
  std::uint64_t key = (static_cast<std::uint64_t>(op.kind) << 16) | (size_class << 4) |
                      static_cast<std::uint64_t>(d.algo);
  if (!logged_.insert(key).second) return;
  LOOM_LOG_INFO(Coll, "rank {}: {}", rank_, d.describe(op.kind, bytes, shape_));
}

algo::Plan CommImpl::make_plan(const coll::OpDesc& op, const CollOptions& opts) {
  algo::PlanRequest r;
  r.op = op;
  r.in_place = op.in_place(rank_);
  r.rank = rank_;
  r.nranks = nranks_;
  r.ring_order = ring_;
  r.hosts = hosts_;
  r.chunk_bytes = settings_.chunk_bytes;
  r.depth = settings_.depth;
  r.min_step_part_bytes = select::ring_min_step_part_bytes(shape_);  // plans must match
  r.buffered_ring_sends = settings_.buffered_ring_sends;
  if (coll::fixed_schedule(op.kind)) return algo::make_plan(r);  // nothing to choose
  if (settings_.deterministic && op.has_redop()) {
    r.algo = coll::Algo::Deterministic;
    return algo::make_plan(r);
  }
  std::optional<coll::Algo> forced = coll::forced_by(opts.algorithm);
  if (!forced) forced = settings_.policy.for_coll(op.kind);
  const std::size_t bytes = std::max(op.send_bytes(nranks_), op.recv_bytes(nranks_));
  select::Decision d = select::choose(op.kind, bytes, costs_, forced);
  log_decision(op, d, bytes);
  r.algo = d.algo;
  return algo::make_plan(r);
}

std::shared_ptr<const algo::Plan> CommImpl::cached_plan(const coll::OpDesc& op,
                                                        const CollOptions& opts) {
  constexpr std::size_t kMaxPlans = 32;
  // An all-to-all-v's plan depends on its counts, a send's on its peers: neither is in the key.
  if (op.kind == coll::CollKind::AllToAllV || op.kind == coll::CollKind::P2P)
    return std::make_shared<const algo::Plan>(make_plan(op, opts));
  const PlanKey key{op.kind, op.dtype, op.root, op.in_place(rank_), op.count, opts.algorithm};
  for (std::size_t i = plans_.size(); i-- > 0;) {
    if (!(plans_[i].first == key)) continue;
    auto plan = plans_[i].second;
    auto at = plans_.begin() + static_cast<std::ptrdiff_t>(i);
    std::rotate(at, at + 1, plans_.end());  // most recent last
    return plan;
  }
  auto plan = std::make_shared<const algo::Plan>(make_plan(op, opts));
  if (plans_.size() == kMaxPlans) plans_.erase(plans_.begin());
  plans_.emplace_back(key, plan);
  return plan;
}

void CommImpl::check_usable(const CollOptions& opts) const {
  if (aborted_.load())
    throw Error(ErrorCode::Aborted, fmt::format("rank {}: the communicator was aborted", rank_));
  throw_if_error(engine_->failure());
  if (Status remote = monitor_->first_failure(); !remote.is_ok()) throw_if_error(remote);
  if (opts.timeout)
    throw_if_error(config::check_timeout("CollOptions::timeout", *opts.timeout)
                       .with_context(fmt::format("rank {}", rank_)));
}

Work CommImpl::submit(coll::OpDesc op, const CollOptions& opts) {
  check_usable(opts);
  if (op.has_redop() && op.redop == RedOp::PreMulSum) op.scalar = opts.scalar;
  if (group_depth_ > 0) return record(std::move(op), opts);
  return Work(launch(std::move(op), opts));
}

std::shared_ptr<OpState> CommImpl::launch(coll::OpDesc op, const CollOptions& opts,
                                          const TaskFactory& make, bool numbered) {
  const bool p2p = op.kind == coll::CollKind::P2P;
  if (p2p) {
    if (!numbered) number_p2p(op);
  } else {
    op.seq = next_seq_++;
    throw_if_error(coll::validate(op, rank_, nranks_));
  }
  const bool on_stream = value_or_throw(device::needs_stream_path(
      stream_path_ ? &stream_path_->device() : nullptr, op, rank_, nranks_, opts.stream));
  if (op.count == 0 && op.kind != coll::CollKind::Barrier && op.kind != coll::CollKind::AllToAllV &&
      !p2p) {
    remember_call(op);
    auto done = std::make_shared<OpState>();
    done->done = true;
    return done;
  }
  std::shared_ptr<const algo::Plan> plan = cached_plan(op, opts);
  if (plan->steps.empty()) {
    remember_call(op);
    auto done = std::make_shared<OpState>();
    done->done = true;
    return done;
  }
  Deadline deadline = Deadline::after(opts.timeout.value_or(settings_.timeout));
  LOOM_LOG_DEBUG(Coll, "rank {}: {} as {} ({} steps)", rank_, coll::describe(op), plan->algorithm,
                 plan->steps.size());
  if (!p2p) {  // collective calls are numbered and compared between ranks; sends are not
    std::lock_guard lk(progress_mu_);
    unfinished_.emplace_back(op.seq, coll::describe(op));
    calls_[op.seq % kCallHistory] = CallRecord{op.seq, op};  // as remember_call()
  }
  if (make) return engine_->submit(make(op, std::move(plan), deadline));
  if (on_stream) return submit_on_stream(op, opts.stream, std::move(plan), deadline);
  return engine_->submit(std::make_unique<CollectiveTask>(*this, op, std::move(plan), deadline));
}

// Numbers a send / receive per peer and direction (after validation: a refused call takes no
// number, so both sides stay in step).
void CommImpl::number_p2p(coll::OpDesc& op) {
  op.seq = next_seq_.load();
  if (p2p_sent_.empty()) {
    p2p_sent_.assign(static_cast<std::size_t>(nranks_), 0);
    p2p_received_.assign(static_cast<std::size_t>(nranks_), 0);
  }
  auto at = [](std::vector<std::uint64_t>& v, int peer) -> std::uint64_t* {
    return peer >= 0 && peer < static_cast<int>(v.size()) ? &v[static_cast<std::size_t>(peer)]
                                                          : nullptr;
  };
  std::uint64_t* sent = at(p2p_sent_, op.p2p.to);
  std::uint64_t* received = at(p2p_received_, op.p2p.from);
  op.p2p.send_seq = sent ? *sent : 0;
  op.p2p.recv_seq = received ? *received : 0;
  throw_if_error(coll::validate(op, rank_, nranks_));
  if (sent) ++*sent;
  if (received) ++*received;
}

std::shared_ptr<OpState> CommImpl::submit_on_stream(const coll::OpDesc& op, void* stream,
                                                    std::shared_ptr<const algo::Plan> plan,
                                                    Deadline deadline) {
  // The direct path has no pre-multiplying step: such calls go through host staging.
  if (direct_ && !op.premultiplies()) {  // the plan runs on the device buffers (cuda_ipc)
    device::StagedCall call = value_or_throw(stream_path_->direct(op, rank_, stream, deadline));
    const std::uint64_t seq = op.seq;
    const bool numbered = op.kind != coll::CollKind::P2P;
    auto inner = direct_->task(op, std::move(plan), nranks_, 2 * settings_.depth, deadline,
                               [this, seq, numbered] {
                                 if (numbered) note_completed(seq);
                               });
    auto state = engine_->submit(stream_path_->wrap(std::move(inner), call));
    throw_if_error(stream_path_->finish(call, stream));
    return state;
  }
  device::StagedCall call =
      value_or_throw(stream_path_->stage(op, rank_, nranks_, stream, deadline));
  auto inner = std::make_unique<CollectiveTask>(*this, call.host_op, std::move(plan), deadline);
  auto state = engine_->submit(stream_path_->wrap(std::move(inner), call));
  throw_if_error(stream_path_->finish(call, stream));
  return state;
}

}  // namespace loom::detail
