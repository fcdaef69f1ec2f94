// CommImpl: its life. Creation learns the job's layout, sets up the transports, agrees on the
// settings that shape plans, and starts the engine and the reliability layer; leaving must be
// safe for a rank's last call: its peers may still be finishing operations it has completed, and
// those may need the rendezvous store (lazy connections) that this rank's process serves. So the
// store's host waits for them before the store goes, every rank marks itself as left (its exit
// is then no failure), and the last rank to leave erases the communicator's keys from the store.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <thread>

#include "core/arena_task.hpp"
#include "core/comm_impl.hpp"
#include "core/comm_setup.hpp"
#include "core/job_layout.hpp"
#include "core/status_signal.hpp"
#include "log/log.hpp"
#include "selector/plan_policy.hpp"
#include "topology/cpu_binding.hpp"
#include "topology/nic_choice.hpp"
#include "transports/registry.hpp"

namespace loom::detail {
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

// The PCI address of the GPU this rank computes with (the device runtime's current device), ""
// without one.
std::string gpu_bus_id(device::Device* dev) {
  if (dev == nullptr) return "";
  auto ordinal = dev->current_device();
  if (!ordinal.is_ok()) return "";
  auto bus = dev->pci_bus_id(*ordinal);
  return bus.is_ok() ? *bus : "";
}

// Milliseconds between laps, for the start-up phases' log line.
class PhaseClock {
 public:
  long long lap() {
    const auto now = Clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_).count();
    last_ = now;
    return static_cast<long long>(ms);
  }

 private:
  Clock::time_point last_ = Clock::now();
};

}  // namespace

Result<std::unique_ptr<CommImpl>> CommImpl::create(CommSetup setup) {
  LOOM_RETURN_IF_ERROR(log::configure(setup.config));
  for (const auto& name : setup.config.unknown_variables())
    LOOM_LOG_WARN(Config, "ignoring unknown setting {} (run loom-info for the list)", name);
  LOOM_ASSIGN_OR_RETURN(CommSettings settings, CommSettings::from(setup.config));
  const net::SocketAddress bind = setup.bind_address;
  std::unique_ptr<CommImpl> comm(new CommImpl(std::move(setup), settings));
  const transport::Registry& registry = transport::builtin_transports();
  // Transports whose address goes into this rank's card (tcp's listener) open before the layout
  // exchange, where this rank's transports bind.
  transport::CreateContext early = comm->create_context();
  early.data_address = bind;
  LOOM_ASSIGN_OR_RETURN(auto prepared, registry.prepare(early));
  if (Status st = comm->init(std::move(prepared), Deadline::after(settings.timeout)); !st.is_ok()) {
    // A peer died during setup: what it left behind (shm: names in /dev/shm) goes now, not with
    // the next job (twice: its store connection may close a moment before its process is
    // provably gone).
    if (st.code() == ErrorCode::PeerFailed)
      for (int i = 0; i < 2; ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        registry.cleanup_after_failed_setup(comm->rank_, comm->comm_id_);
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
      calls_(setup.rank, setup.nranks,
             settings_.flight_calls == 0 ? CallLedger::kDefaultHistory : settings_.flight_calls,
             settings_.flight_calls != 0),
      secret_(setup.secret),
      liveness_(std::move(setup.liveness)) {}

transport::CreateContext CommImpl::create_context() const {
  transport::CreateContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.comm_id = comm_id_;
  ctx.store = store_;
  ctx.store_prefix = fmt::format("loom/{:016x}/", comm_id_);
  ctx.config = &config_;
  ctx.data_address = data_address_;
  ctx.secret = secret_;
  ctx.peer_check = [this](int peer) { return known_failure(peer); };
  return ctx;
}

// Learns the job's layout, sets up the transports it needs, connects the ring neighbours, and
// starts the engine. A rank that fails on the way tells the others at the closing rendezvous, so
// they fail with its reason at once (rank 0, which checks no setting, would otherwise wait there
// until LOOM_TIMEOUT for a rank that found the plan settings differ).
Status CommImpl::init(std::vector<std::unique_ptr<transport::Transport>> prepared,
                      Deadline deadline) {
  const std::string prefix = fmt::format("loom/{:016x}/", comm_id_);
  std::optional<net::SocketAddress> card;  // this rank's data address: tcp's listener
  std::vector<net::SocketAddress> rails;   // and its further rails (tcp's other listeners)
  for (const auto& t : prepared)
    if (!card) {
      card = t->card_address();
      if (card) rails = t->card_rails();
    }
  if (!card)
    return make_error(ErrorCode::Internal, "rank {}: no transport gives an address for its card",
                      rank_);
  data_address_ = *card;
  PhaseClock phases;
  LOOM_ASSIGN_OR_RETURN(JobLayout layout, exchange_layout(*store_, prefix, rank_, nranks_, config_,
                                                          *card, rails, deadline, liveness_));
  const auto layout_ms = phases.lap();
  if (Status st = connect(std::move(prepared), layout, prefix, deadline); !st.is_ok()) {
    (void)bootstrap::store_barrier_fail(*store_, rendezvous_name(prefix), rank_, st);
    return st;
  }
  const auto transports_ms = phases.lap();
  LOOM_RETURN_IF_ERROR(finish_rendezvous(*store_, prefix, rank_, nranks_, deadline, liveness_));
  const auto rendezvous_ms = phases.lap();
  // After the rendezvous: a rank that failed to connect (or disagreed on a setting) has told the
  // others there, and none of them waits for its arena vote.
  LOOM_RETURN_IF_ERROR(init_arena(layout, deadline));
  settings_.spin = choose_spin(settings_.spin, my_cpu_load(layout, rank_));
  settings_.arena_yield = settings_.yield.count() >= 0     ? settings_.yield
                          : my_cpu_load(layout, rank_) > 1 ? select::kSharedCpuArenaYield
                                                           : select::kAutoYield;
  if (settings_.yield.count() < 0) settings_.yield = select::kAutoYield;
  exec::EngineOptions eo;
  eo.spin = settings_.spin;
  eo.yield = settings_.yield;
  eo.name = fmt::format("rank {}", rank_);
  eo.on_failure = [this](const Status& why) {
    note_failed_peer(why);
    Status named = reliability_ ? reliability_->monitor().local_failure(why) : why;
    // The engine's lock is held here: the record says what failed rather than asking status().
    if (!settings_.flight_dir.empty())
      write_flight_record("failure",
                          fmt::format("failed: {}: {}", to_string(named.code()), named.message()));
    return named;
  };
  eo.idle_check = [this] { return check_unread_messages(); };
  eo.stall_check = [this] { return check_stalled_call(); };
  eo.explain_failure = [this](const Status& why) { return explain_failure(why); };
  engine_ = std::make_unique<exec::Engine>(eo);
  LOOM_RETURN_IF_ERROR(start_reliability(layout, deadline));
  liveness_ = nullptr;  // the failure monitor watches the ranks from now on
  // One compact line for start-up measurements (benchmarks/measure/startup.sh reads it). The
  // rank whose process serves the store adds what it has served so far (about all of creation:
  // this rank is done once every rank has published its identity).
  const std::string served =
      server_ ? fmt::format("; the store served {} requests so far", server_->load().requests) : "";
  LOOM_LOG_INFO(Bootstrap,
                "rank {} of {}: start-up phases (ms): layout exchange {}, transports {}, "
                "closing rendezvous {}, arena and failure monitor {}{}",
                rank_, nranks_, layout_ms, transports_ms, rendezvous_ms, phases.lap(), served);
  LOOM_LOG_INFO(Init,
                "rank {} of {}: communicator {:016x} ready ({} ranks on this host, spin {} us, "
                "yield {} us, {} us in the shared-memory arena)",
                rank_, nranks_, comm_id_, layout.ranks_on_my_host(rank_), settings_.spin.count(),
                settings_.yield.count(), settings_.arena_yield.count());
  return Status::ok();
}

// The transports, the ring neighbours' connections, the plan settings' agreement and the device
// paths.
Status CommImpl::connect(std::vector<std::unique_ptr<transport::Transport>> prepared,
                         const JobLayout& layout, const std::string& prefix, Deadline deadline) {
  transport::CreateContext ctx = create_context();  // what the transports are created from
  ctx.ranks_on_host = layout.ranks_on_my_host(rank_);
  ctx.cpu_load = my_cpu_load(layout, rank_);
  ctx.host_cpu_load = host_cpu_load(layout, rank_);
  ctx.peer_addresses = layout.tcp_addresses;
  ctx.peer_rails = layout.rail_addresses;
  for (const auto& ri : layout.topology.ranks) ctx.host_ids.push_back(ri.host_id);
  LOOM_ASSIGN_OR_RETURN(device::Device * dev, device::device_by_name(settings_.device));
  ctx.nearest_nics = [job = layout.topology, rank = rank_,
                      gpu = gpu_bus_id(dev)](const std::vector<std::string>& names) {
    topo::NicChoice c = topo::nearest_nics(job, rank, gpu, names);
    return transport::NicSubset{std::move(c.names), std::move(c.why)};
  };
  const transport::Registry& registry = transport::builtin_transports();
  for (auto& t : prepared) LOOM_RETURN_IF_ERROR(registry.complete(*t, ctx));
  LOOM_ASSIGN_OR_RETURN(
      transports_, PeerTransports::create(ctx, layout.transport_of, std::move(prepared), registry));
  settings_.plan.buffered_ring_sends = transports_->plan_hints().buffered_ring_sends;
  const std::vector<int>& ring = layout.ring;
  if (nranks_ > 1) {
    auto pos = static_cast<std::size_t>(std::find(ring.begin(), ring.end(), rank_) - ring.begin());
    std::size_t n = ring.size();
    LOOM_RETURN_IF_ERROR(
        transports_->ensure({ring[(pos + 1) % n], ring[(pos + n - 1) % n]}, deadline));
  }
  if (settings_.plan.chunk_bytes == 0)
    settings_.plan.chunk_bytes = select::auto_chunk_bytes(layout.any_ofi);
  LOOM_RETURN_IF_ERROR(agree_on_plan_settings(prefix, dev, deadline));
  planner_ = std::make_unique<Planner>(rank_, nranks_, ring, layout.topology, settings_.plan);
  LOOM_RETURN_IF_ERROR(init_direct_path(dev, layout, prefix, deadline));
  if (dev) {
    std::shared_ptr<device::GateLine> line;
    if (settings_.wait_value_gates) {
      auto made = device::GateLine::create(*dev, deadline);
      if (!made.is_ok()) return made.status().with_context(fmt::format("rank {}", rank_));
      line = std::move(*made);
    }
    stream_path_ = std::make_unique<device::StreamPath>(*dev, settings_.timeout, std::move(line));
  }
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
  transport::CreateContext ctx = create_context();  // cuda_ipc's, through the registry
  ctx.host_ids = std::move(hosts);
  ctx.device = dev;
  ctx.allowed = allowed;
  ctx.deadline = deadline;
  LOOM_ASSIGN_OR_RETURN(direct_, device::DirectPath::create(ctx, network));
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

// The failure monitor watches the ranks from here on; it reaches this communicator only through
// the hooks.
Status CommImpl::start_reliability(const JobLayout& layout, Deadline deadline) {
  ReliabilitySetup r;
  r.rank = rank_;
  r.nranks = nranks_;
  r.comm_id = comm_id_;
  r.store = store_;
  r.serves_store = server_ != nullptr;
  r.data_address = data_address_;
  r.secret = secret_;
  r.store_options = store_options(config_);
  r.timeout = settings_.timeout;
  r.hooks.fail = [this](const Status& why) {
    note_failed_peer(why);
    if (engine_) engine_->abort(why, Clock::duration::zero());
  };
  // Without RankProgress::derived, which Reliability adds: the monitor's thread runs while
  // reliability_ is being assigned, so the hook must not read it.
  r.hooks.progress = [this] { return calls_.progress(); };
  r.hooks.call = [this](std::int64_t seq) {
    return seq < 0 ? std::nullopt : calls_.describe(static_cast<std::uint64_t>(seq));
  };
  r.hooks.check_calls_after = settings_.check_calls_after;
  LOOM_ASSIGN_OR_RETURN(reliability_,
                        Reliability::start(std::move(r), layout.topology, deadline, liveness_));
  return Status::ok();
}

// Every rank must build matching plans, so the settings that shape them must be equal: rank 0
// publishes its values and every other rank compares (one store read per rank).
Status CommImpl::agree_on_plan_settings(const std::string& prefix, const device::Device* dev,
                                        Deadline deadline) {
  const std::vector<std::string> mine = {
      // Device setup is collective: a rank without the others' runtime would wait for them.
      fmt::format("device runtime (LOOM_DEVICE)={}", dev ? dev->name() : "none"),
      fmt::format("LOOM_ALGO={}", settings_.algo),
      fmt::format("LOOM_DETERMINISTIC={}", settings_.plan.deterministic ? 1 : 0),
      fmt::format("LOOM_CHUNK_SIZE={}", settings_.plan.chunk_bytes),
      fmt::format("LOOM_PIPELINE_DEPTH={}", settings_.plan.depth),
      fmt::format("LOOM_SHM_ONESHOT_MAX={}", settings_.oneshot),
      fmt::format("LOOM_SHM_ARENA_PIECE={}", settings_.arena_piece),
      fmt::format("LOOM_TUNING={}", settings_.plan.tuning.to_string())};
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

CommImpl::~CommImpl() {
  unregister_for_status(this);  // first: the SIGUSR1 report may be reading this communicator
  drop_open_group();
  // Drain first (a peer's failure, reported by the monitor, still fails what hangs), then stop
  // the monitor (it finishes a pending hang report), then the engine.
  if (engine_) engine_->drain();
  if (!settings_.flight_dir.empty()) write_flight_record("destroyed", status());
  // Messages of finished calls that no call took: a mismatched call (reported to the others).
  if (engine_ && !aborted_.load() && !engine_->check_idle(std::chrono::seconds(1)).is_ok())
    LOOM_LOG_ERROR(Coll, "rank {}: the communicator was destroyed after a mismatched call", rank_);
  if (reliability_ && !aborted_.load()) leave();
  engine_.reset();
  delete spare_run_.exchange(nullptr);
  delete spare_arena_.exchange(nullptr);
}

void CommImpl::leave() {
  linger_for_peers();
  FailureMonitor& monitor = reliability_->monitor();
  monitor.mark_left();
  monitor.stop();
  monitor.count_out(fmt::format("loom/{:016x}/", comm_id_));
}

void CommImpl::linger_for_peers() {
  if (!server_ || nranks_ == 1) return;
  // After a failure the others still need the store to learn its cause (a mismatch this rank
  // found is theirs too): wait, briefly, until they have failed, left or dropped the store.
  constexpr auto kFailedLinger = std::chrono::seconds(2);
  const bool failed = !async_error().is_ok();
  RankProgress mine = progress();
  if (failed) mine.completed = std::numeric_limits<std::int64_t>::max();
  const auto started = Clock::now();
  const std::vector<int> missing = reliability_->monitor().wait_for_peers(
      mine, [this] { return server_->clients(); },
      Deadline::after(failed ? std::min<std::chrono::milliseconds>(settings_.timeout, kFailedLinger)
                             : settings_.timeout));
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (!missing.empty() && failed) {
    LOOM_LOG_INFO(Init,
                  "rank {}: leaving after {} ms, after a failure, while ranks {} still use "
                  "the rendezvous store this process serves",
                  rank_, waited, format_rank_ranges(missing));
  } else if (!missing.empty()) {
    LOOM_LOG_WARN(Init,
                  "rank {}: leaving after {} ms although ranks {} may still need the rendezvous "
                  "store this process serves (they neither finished operation #{} nor left)",
                  rank_, waited, format_rank_ranges(missing), mine.completed);
  } else if (waited > 0) {
    LOOM_LOG_DEBUG(Init, "rank {}: waited {} ms for the other ranks before the store goes", rank_,
                   waited);
  }
}

}  // namespace loom::detail
