#include "device/peer_read.hpp"

#include <fmt/format.h>

#include <atomic>

#include "device/peer_read_plan.hpp"
#include "device/peer_read_task.hpp"
#include "log/log.hpp"

namespace loom::device {
namespace {

constexpr auto kWatchTick = std::chrono::milliseconds(20);
// After a failure: how long the calls before the failed one may take to finish by themselves,
// and how long the host keeps writing the flags this rank's stream waits on.
constexpr auto kReleaseGrace = std::chrono::seconds(5);
constexpr auto kReleaseFor = std::chrono::seconds(30);
constexpr auto kDrainFor = std::chrono::seconds(10);  // at teardown, before releasing

std::uint32_t flag(std::uint64_t ticket, std::uint32_t phase) {
  return static_cast<std::uint32_t>(4 * ticket + phase);
}

void store(std::uint32_t* word, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(*word).store(v, std::memory_order_release);
}

std::uint32_t load(const std::uint32_t* word) {
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(word))
      .load(std::memory_order_acquire);
}

// A task that fails at once (the route failed before the call).
class FailedTask final : public exec::Task {
 public:
  FailedTask(Status why, std::string what) : why_(std::move(why)), what_(std::move(what)) {}
  Status start(Deadline) override { return why_; }
  Result<exec::Progress> progress() override { return why_; }
  bool prepare_wait(std::vector<pollfd>&) override { return true; }
  [[nodiscard]] std::string describe() const override { return what_; }
  [[nodiscard]] std::string pending() const override { return "failed"; }
  [[nodiscard]] Deadline deadline() const override { return Deadline::never(); }

 private:
  Status why_;
  std::string what_;
};

}  // namespace

Result<std::unique_ptr<PeerReadRoute>> PeerReadRoute::create(transport::DeviceTransport& transport,
                                                             transport::PeerBoard& board,
                                                             int nranks, std::size_t cache_limit) {
  LOOM_ASSIGN_OR_RETURN(void* gate, transport.device().alloc_pinned(sizeof(std::uint32_t)));
  store(static_cast<std::uint32_t*>(gate), 0);
  return std::unique_ptr<PeerReadRoute>(
      new PeerReadRoute(transport, board, nranks, cache_limit, static_cast<std::uint32_t*>(gate)));
}

PeerReadRoute::PeerReadRoute(transport::DeviceTransport& transport, transport::PeerBoard& board,
                             int nranks, std::size_t cache_limit, std::uint32_t* gate)
    : transport_(transport),
      board_(board),
      dev_(transport.device()),
      nranks_(nranks),
      gate_(gate),
      exports_(dev_, 4 * cache_limit),
      imports_([this](const IpcHandle& h) { return dev_.ipc_open(h); },
               [this](void* p) { dev_.ipc_close(p); }, cache_limit) {}

PeerReadRoute::~PeerReadRoute() {
  std::unique_lock lk(mu_);
  // Calls still on the device finish by themselves while this rank's stream has reached them
  // and its peers go on (a peer that failed or left: released below). A call whose inputs this
  // rank's own stream has not produced is not waited for: its peers are told it leaves.
  const Deadline drain = Deadline::after(kDrainFor);
  auto ours_ready = [&] {
    auto q = dev_.query(in_flight_.front().ready);
    return q.is_ok() && *q;
  };
  int cause = -1;
  for (retire(); !in_flight_.empty() && failed_.is_ok() && ours_ready() &&
                 transport_.failed_rank() < 0 && peer_gone_midway(cause) < 0 && !drain.expired();
       retire()) {
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lk.lock();
  }
  if (!in_flight_.empty() && failed_.is_ok())
    fail(Status(ErrorCode::Aborted,
                fmt::format("rank {}: peer-read calls still on the device at teardown ({})", rank(),
                            flags_report())),
         in_flight_.front().ticket);
  board_.close(transport_.failed_rank());  // the peers stop waiting for this rank
  stop_ = true;
  cv_.notify_all();
  lk.unlock();
  if (watchdog_.joinable()) watchdog_.join();
  if (!released_ && !failed_.is_ok()) release();  // no watchdog ran it
  for (const InFlight& f : in_flight_) {
    dev_.destroy_event(f.done);
    dev_.destroy_event(f.ready);
  }
  for (Event e : events_) dev_.destroy_event(e);
  dev_.free_pinned(gate_);
}

Result<PeerCard> PeerReadRoute::make_card(const coll::OpDesc& op, std::uint64_t ticket) {
  PeerCard c;
  c.ticket = ticket;
  c.seq = op.seq;
  c.count = op.count;
  c.root = op.root;
  c.kind = static_cast<std::uint8_t>(op.kind);
  c.dtype = static_cast<std::uint8_t>(op.dtype);
  c.op = static_cast<std::uint8_t>(op.redop);
  auto share = [&](const void* p, std::size_t bytes, BufferRef& ref) {
    if (p == nullptr || bytes == 0) return;
    auto r = exports_.share(p, bytes);
    if (r.is_ok()) {
      ref = *r;
      return;
    }
    LOOM_LOG_DEBUG(Cuda, "rank {}: {}: {}", rank(), coll::describe(op), r.status().message());
    c.flags |= PeerCard::kUnexportable;
  };
  if (op.uses_send(rank())) share(op.send, op.send_bytes(nranks_), c.send);
  if (op.uses_recv(rank())) share(op.recv, op.recv_bytes(nranks_), c.recv);
  return c;
}

Result<std::unique_ptr<exec::Task>> PeerReadRoute::submit(const coll::OpDesc& op, Stream stream,
                                                          Deadline deadline, Fallback fallback,
                                                          std::function<void()> on_done) {
  std::lock_guard lk(mu_);
  const std::string what = fmt::format("rank {}: {} [peer-read route]", rank(), coll::describe(op));
  if (!failed_.is_ok())
    return std::unique_ptr<exec::Task>(std::make_unique<FailedTask>(failed_, what));
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watch(); });
  LOOM_ASSIGN_OR_RETURN(PeerCard card, make_card(op, issued_ + 1));
  LOOM_ASSIGN_OR_RETURN(Event ready, take_event());
  Status st = dev_.record(ready, stream);
  if (st.is_ok()) st = dev_.wait_value(stream, gate_, static_cast<std::uint32_t>(card.ticket));
  if (!st.is_ok()) {
    give_event(ready);
    return st.with_context(fmt::format("{}: ordering it on stream {}", what, stream));
  }
  ++issued_;
  return std::unique_ptr<exec::Task>(std::make_unique<PeerReadTask>(
      *this, op, card, ready, deadline, std::move(fallback), std::move(on_done)));
}

Result<Event> PeerReadRoute::take_event() {
  if (!events_.empty()) {
    Event e = events_.back();
    events_.pop_back();
    return e;
  }
  return dev_.create_event();
}

void PeerReadRoute::give_event(Event e) {
  events_.push_back(e);
}

void PeerReadRoute::retire() {
  while (!in_flight_.empty()) {
    auto passed = dev_.query(in_flight_.front().done);
    if (!passed.is_ok() || !*passed) break;
    retired_ = in_flight_.front().ticket;
    give_event(in_flight_.front().done);
    give_event(in_flight_.front().ready);
    in_flight_.pop_front();
  }
  imports_.retire(retired_);
}

Status PeerReadRoute::barrier(std::uint64_t ticket, std::uint32_t phase) {
  const Stream s = transport_.stream();
  const std::uint32_t v = flag(ticket, phase);
  for (int p = 0; p < nranks_; ++p)
    if (p != rank()) LOOM_RETURN_IF_ERROR(dev_.write_value(s, board_.outbox(p), v));
  for (int p = 0; p < nranks_; ++p)
    if (p != rank()) LOOM_RETURN_IF_ERROR(dev_.wait_value(s, board_.inbox(p), v));
  return Status::ok();
}

Status PeerReadRoute::enqueue(PeerReadTask& task) {
  const std::uint64_t t = task.ticket();
  const coll::OpDesc& op = task.op();
  RankBuffers b;
  b.send.assign(static_cast<std::size_t>(nranks_), nullptr);
  b.recv.assign(static_cast<std::size_t>(nranks_), nullptr);
  for (int p = 0; p < nranks_; ++p) {
    const auto up = static_cast<std::size_t>(p);
    if (p == rank()) {
      b.send[up] = static_cast<const std::uint8_t*>(op.send);
      b.recv[up] = static_cast<std::uint8_t*>(op.recv);
      continue;
    }
    const PeerCard& c = task.cards()[up];
    if (c.send.bytes > 0) {
      LOOM_ASSIGN_OR_RETURN(void* at, imports_.map(p, c.send, t));
      b.send[up] = static_cast<const std::uint8_t*>(at);
    }
    if (c.recv.bytes > 0) {
      LOOM_ASSIGN_OR_RETURN(void* at, imports_.map(p, c.recv, t));
      b.recv[up] = static_cast<std::uint8_t*>(at);
    }
  }
  std::optional<MultiReduce> launch = peer_read_launch(op, rank(), nranks_, b);
  const Stream s = transport_.stream();
  LOOM_RETURN_IF_ERROR(dev_.wait_event(s, task.ready()));
  LOOM_RETURN_IF_ERROR(barrier(t, 1));
  if (launch) {
    launch->skip_word = board_.abandon_word();
    launch->ticket = static_cast<std::uint32_t>(t);
    LOOM_RETURN_IF_ERROR(dev_.reduce_multi_async(*launch, s));
  }
  LOOM_RETURN_IF_ERROR(barrier(t, 2));
  return finish_on_stream(t, op, task.deadline(), task.take_ready());
}

Status PeerReadRoute::finish_on_stream(std::uint64_t ticket, const coll::OpDesc& op,
                                       Deadline deadline, Event ready) {
  const Stream s = transport_.stream();
  Status st = dev_.write_value(s, gate_, static_cast<std::uint32_t>(ticket));
  auto done = st.is_ok() ? take_event() : Result<Event>(st);
  if (done.is_ok()) st = dev_.record(*done, s);
  if (!done.is_ok() || !st.is_ok()) {
    if (done.is_ok()) give_event(*done);
    give_event(ready);
    return done.is_ok() ? st : done.status();
  }
  in_flight_.push_back(InFlight{ticket, ready, *done, deadline, op});
  cv_.notify_all();
  return Status::ok();
}

Status PeerReadRoute::peer_left(int peer, int cause, const std::string& what) const {
  if (cause >= 0 && cause != rank())
    return Status(ErrorCode::PeerFailed,
                  fmt::format("{}: rank {} failed (rank {} left the peer-read route after seeing "
                              "it fail)",
                              what, cause, peer))
        .with_peer(cause);
  return Status(ErrorCode::PeerFailed,
                fmt::format("{}: rank {} left the peer-read route without this call", what, peer))
      .with_peer(peer);
}

int PeerReadRoute::peer_gone_midway(int& cause) const {
  if (in_flight_.empty()) return -1;
  const std::uint32_t last = flag(in_flight_.back().ticket, 2);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank() || !board_.closed(p, cause)) continue;
    // Left after its stream wrote every flag this rank waits for: nothing is missing.
    if (static_cast<std::int32_t>(load(board_.inbox(p)) - last) < 0) return p;
  }
  return -1;
}

void PeerReadRoute::abandon(std::uint64_t ticket) {
  std::lock_guard lk(mu_);
  if (failed_.is_ok())
    fail(Status(ErrorCode::Aborted,
                fmt::format("rank {}: the peer-read route's call {} did not reach the device",
                            rank(), ticket)),
         ticket);
}

void PeerReadRoute::fail(Status why, std::uint64_t from) {
  if (!failed_.is_ok()) return;
  LOOM_LOG_WARN(Cuda, "rank {}: peer-read route: abandoning its calls from {} on: {}", rank(), from,
                why.message());
  failed_ = std::move(why);
  failed_from_ = from;
  cv_.notify_all();
}

std::string PeerReadRoute::flags_report() const {
  std::string out;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank()) continue;
    const std::uint32_t v = load(board_.inbox(p));
    out += fmt::format("{}rank {}'s stream at call {} step {}", out.empty() ? "" : ", ", p, v / 4,
                       v % 4);
  }
  return out;
}

void PeerReadRoute::watch() {
  (void)dev_.set_device(transport_.device_ordinal());
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (!failed_.is_ok()) {
      if (!released_) {
        lk.unlock();
        release();
        lk.lock();
      }
      cv_.wait(lk, [&] { return stop_; });
      break;
    }
    retire();
    if (in_flight_.empty()) {
      cv_.wait(lk, [&] { return stop_ || !failed_.is_ok() || !in_flight_.empty(); });
      continue;
    }
    const InFlight& oldest = in_flight_.front();
    int cause = -1;
    if (const int gone = peer_gone_midway(cause); gone >= 0) {
      fail(peer_left(gone, cause,
                     fmt::format("rank {}: {} (peer-read route, call {})", rank(),
                                 coll::describe(oldest.op), oldest.ticket)),
           oldest.ticket);
    } else if (const int f = transport_.failed_rank(); f >= 0) {
      fail(Status(ErrorCode::PeerFailed,
                  fmt::format("rank {}: rank {} failed while {} was on the device (peer-read "
                              "route)",
                              rank(), f, coll::describe(oldest.op)))
               .with_peer(f),
           oldest.ticket);
    } else if (oldest.deadline.expired()) {
      fail(Status(ErrorCode::Timeout,
                  fmt::format("rank {}: {} (peer-read route, call {}) still on the device at its "
                              "deadline: {}",
                              rank(), coll::describe(oldest.op), oldest.ticket, flags_report())),
           oldest.ticket);
    } else {
      cv_.wait_for(lk, kWatchTick);
    }
  }
}

void PeerReadRoute::release() {
  std::unique_lock lk(mu_);
  const std::uint64_t from = failed_from_;
  std::uint32_t* abandon = board_.abandon_word();
  if (load(abandon) == 0 || static_cast<std::int32_t>(load(abandon) - from) > 0)
    store(abandon, static_cast<std::uint32_t>(from));
  // The calls before the failed one are whole: let them finish, unless a peer is gone.
  const Deadline grace = Deadline::after(kReleaseGrace);
  for (retire(); retired_ + 1 < from && !in_flight_.empty() && transport_.failed_rank() < 0 &&
                 !grace.expired();
       retire()) {
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lk.lock();
  }
  // Every flag this rank's stream may wait on, written until it has drained: a peer still alive
  // may overwrite one with an older value meanwhile.
  const Deadline until = Deadline::after(kReleaseFor);
  for (retire(); !in_flight_.empty() && !until.expired(); retire()) {
    const std::uint32_t v = flag(issued_ + 1, 0);
    for (int p = 0; p < nranks_; ++p)
      if (p != rank()) store(board_.inbox(p), v);
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lk.lock();
  }
  if (!in_flight_.empty())
    LOOM_LOG_ERROR(Cuda, "rank {}: peer-read route: the stream did not drain within {} s ({})",
                   rank(), kReleaseFor.count(), flags_report());
  // No call is queued on the communicator's stream any more: open every caller's gate.
  store(gate_, static_cast<std::uint32_t>(issued_));
  released_ = true;
}

}  // namespace loom::device
