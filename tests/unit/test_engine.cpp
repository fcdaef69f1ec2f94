// The executor engine's driving protocol: a caller that waits drives its own operation, the
// worker takes over operations nobody drives, idle operations time out naming what they wait for,
// and a blocked operation is woken through its descriptors.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "executor/engine.hpp"

using namespace std::chrono_literals;
using loom::Clock;
using loom::Deadline;
using loom::ErrorCode;
using loom::Result;
using loom::Status;
namespace ex = loom::exec;

namespace {

// What a FakeTask saw; outlives the task (which the engine destroys when it finishes).
struct Record {
  std::atomic<bool> finished{false};
  std::atomic<std::thread::id> started_by{};
  std::atomic<int> starts{0};
  std::atomic<int>* order = nullptr;  // when set: finished_as takes the next number
  std::atomic<int> finished_as{-1};
  std::atomic<int> queued{0};  // Task::queued() calls, and by which thread, before which start
  std::atomic<std::thread::id> queued_by{};
  std::atomic<int> starts_when_queued{-1};
};

// Done after `rounds` calls of progress() once `ready` (if given) is set.
class FakeTask final : public ex::Task {
 public:
  FakeTask(Record& rec, int rounds, Deadline deadline, std::atomic<bool>* ready = nullptr,
           int fd = -1)
      : rec_(rec), rounds_(rounds), deadline_(deadline), ready_(ready), fd_(fd) {}

  Status start(Deadline) override {
    rec_.started_by = std::this_thread::get_id();
    ++rec_.starts;
    return Status::ok();
  }
  Result<ex::Progress> progress() override {
    if (ready_ != nullptr && !ready_->load()) return ex::Progress::Idle;
    if (--rounds_ > 0) return ex::Progress::Advanced;
    if (rec_.order != nullptr) rec_.finished_as = (*rec_.order)++;
    rec_.finished = true;
    return ex::Progress::Done;
  }
  bool prepare_wait(std::vector<pollfd>& fds) override {
    if (ready_ != nullptr && ready_->load()) return false;
    if (fd_ >= 0) fds.push_back({fd_, POLLIN, 0});
    return true;
  }
  void queued() override {
    rec_.queued_by = std::this_thread::get_id();
    rec_.starts_when_queued = rec_.starts.load();
    ++rec_.queued;
  }
  [[nodiscard]] std::string describe() const override { return "fake op"; }
  [[nodiscard]] std::string pending() const override { return "waiting for the flag"; }
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

 private:
  Record& rec_;
  int rounds_;
  Deadline deadline_;
  std::atomic<bool>* ready_;
  int fd_;
};

// Makes progress only when driven by a thread other than the one that started it.
class NeedsOtherThread final : public ex::Task {
 public:
  explicit NeedsOtherThread(Record& rec) : rec_(rec) {}
  Status start(Deadline) override {
    rec_.started_by = std::this_thread::get_id();
    return Status::ok();
  }
  Result<ex::Progress> progress() override {
    if (std::this_thread::get_id() == rec_.started_by.load()) return ex::Progress::Idle;
    rec_.finished = true;
    return ex::Progress::Done;
  }
  bool prepare_wait(std::vector<pollfd>&) override { return true; }
  [[nodiscard]] std::string describe() const override { return "handoff op"; }
  [[nodiscard]] std::string pending() const override { return "another thread"; }
  [[nodiscard]] Deadline deadline() const override { return Deadline::after(60s); }

 private:
  Record& rec_;
};

// Idle until `ready`, with nothing to block on: asks for a timed wake-up with a pollfd of -1 (as
// cuda_ipc waits do) or with no descriptor at all (as device-stream waits do).
class TimedWaitTask final : public ex::Task {
 public:
  TimedWaitTask(Record& rec, std::atomic<bool>& ready, bool minus_one)
      : rec_(rec), ready_(ready), minus_one_(minus_one) {}
  Status start(Deadline) override { return Status::ok(); }
  Result<ex::Progress> progress() override {
    if (!ready_.load()) return ex::Progress::Idle;
    rec_.finished = true;
    return ex::Progress::Done;
  }
  bool prepare_wait(std::vector<pollfd>& fds) override {
    if (minus_one_) fds.push_back({-1, 0, 0});
    return true;
  }
  [[nodiscard]] std::string describe() const override { return "timed op"; }
  [[nodiscard]] std::string pending() const override { return "the flag"; }
  [[nodiscard]] Deadline deadline() const override { return Deadline::after(60s); }

 private:
  Record& rec_;
  std::atomic<bool>& ready_;
  bool minus_one_;
};

double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

ex::EngineOptions options(std::chrono::microseconds grace) {
  ex::EngineOptions o;
  o.spin = 5us;
  o.grace = grace;
  o.name = "test";
  return o;
}

Status wait(const std::shared_ptr<loom::detail::OpState>& op, std::chrono::milliseconds limit) {
  auto core = op->engine.lock();
  if (!core) return {ErrorCode::Internal, "no engine"};
  return core->wait(*op, Deadline::after(limit));
}

}  // namespace

TEST_CASE("engine: a caller that waits drives its own operation", "[engine]") {
  // The grace period is far longer than this test: only the caller can start the operation.
  ex::Engine engine(options(std::chrono::seconds(600)));
  Record rec;
  auto op = engine.submit(std::make_unique<FakeTask>(rec, 5, Deadline::after(30s)));
  REQUIRE(wait(op, 30s).is_ok());
  CHECK(rec.finished);
  CHECK(rec.started_by.load() == std::this_thread::get_id());
}

TEST_CASE("engine: the worker completes an operation nobody waits for", "[engine]") {
  ex::Engine engine(options(100us));
  Record rec;
  auto op = engine.submit(std::make_unique<FakeTask>(rec, 3, Deadline::after(30s)));
  auto until = Clock::now() + 20s;
  while (!rec.finished && Clock::now() < until) std::this_thread::yield();
  REQUIRE(rec.finished);
  CHECK(rec.started_by.load() != std::this_thread::get_id());
  CHECK(wait(op, 5s).is_ok());
}

TEST_CASE("engine: an operation that never progresses times out naming what it waits for",
          "[engine]") {
  ex::Engine engine(options(100us));
  Record rec;
  std::atomic<bool> never{false};
  auto op = engine.submit(std::make_unique<FakeTask>(rec, 1, Deadline::after(300ms), &never));
  auto start = Clock::now();
  Status st = wait(op, 20s);
  CHECK(st.code() == ErrorCode::Timeout);
  CHECK(st.message().find("fake op") != std::string::npos);
  CHECK(st.message().find("waiting for the flag") != std::string::npos);
  CHECK(Clock::now() - start < 10s);
  CHECK(engine.failure().code() == ErrorCode::Timeout);  // later operations fail with it
}

TEST_CASE("engine: a blocked operation is woken through its descriptor", "[engine]") {
  auto o = options(100us);
  o.max_block = std::chrono::milliseconds(60'000);  // only the descriptor can end the block soon
  ex::Engine engine(o);
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  REQUIRE(efd >= 0);
  Record rec;
  std::atomic<bool> ready{false};
  auto op = engine.submit(std::make_unique<FakeTask>(rec, 2, Deadline::after(30s), &ready, efd));
  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);  // lets the engine block first; not synchronisation
    ready = true;
    std::uint64_t one = 1;
    (void)!::write(efd, &one, sizeof one);
  });
  auto start = Clock::now();
  Status st = wait(op, 50s);
  waker.join();
  ::close(efd);
  INFO(st.message());
  CHECK(st.is_ok());
  CHECK(rec.finished);
  CHECK(Clock::now() - start < 20s);
}

TEST_CASE("engine: a caller that waits takes over from the worker", "[engine]") {
  ex::Engine engine(options(100us));
  Record rec;
  auto op = engine.submit(std::make_unique<NeedsOtherThread>(rec));
  // The worker starts it after the grace period; driven by the worker it never finishes.
  auto until = Clock::now() + 20s;
  while (rec.started_by.load() == std::thread::id() && Clock::now() < until)
    std::this_thread::yield();
  REQUIRE(rec.started_by.load() != std::thread::id());
  REQUIRE(rec.started_by.load() != std::this_thread::get_id());
  Status st = wait(op, 20s);  // only finishes if the worker hands driving over to us
  INFO(st.message());
  CHECK(st.is_ok());
  CHECK(rec.finished);
}

TEST_CASE("engine: a wait with nothing to block on naps instead of spinning", "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));  // the caller drives it
  Record rec;
  std::atomic<bool> ready{false};
  const bool minus_one = GENERATE(true, false);
  INFO("pollfd of -1: " << minus_one);
  auto op = engine.submit(std::make_unique<TimedWaitTask>(rec, ready, minus_one));
  std::thread setter([&] {
    std::this_thread::sleep_for(400ms);  // the length of the wait; not synchronisation
    ready = true;
  });
  const double cpu0 = thread_cpu_ms();
  Status st = wait(op, 30s);
  const double cpu = thread_cpu_ms() - cpu0;
  setter.join();
  INFO(st.message());
  REQUIRE(st.is_ok());
  CHECK(rec.finished);
  // Spinning would burn the whole 400 ms (or its share of a loaded CPU); naps of 1/16 of the
  // wait so far (20 us .. 1 ms) cost a few milliseconds.
  INFO("CPU time of the waiting thread: " << cpu << " ms");
  CHECK(cpu < 80);
}

// The idle check (messages a mismatched call left unread, for a communicator): run by the worker
// once the queue has stayed empty for idle_check_after after an operation completed (never
// before any), again later, as the only driving thread; a failure it returns fails later calls.
TEST_CASE("engine: the idle check runs after operations complete and its failure sticks",
          "[engine]") {
  std::atomic<int> checks{0};
  std::atomic<bool> fail{false};
  ex::EngineOptions o = options(100us);
  o.idle_check_after = 20ms;
  o.idle_check = [&] {
    ++checks;
    return fail ? Status(ErrorCode::Mismatch, "a stray message") : Status::ok();
  };
  ex::Engine engine(o);
  std::this_thread::sleep_for(150ms);
  CHECK(checks == 0);  // nothing completed yet
  Record rec;
  REQUIRE(
      wait(engine.submit(std::make_unique<FakeTask>(rec, 2, Deadline::after(30s))), 30s).is_ok());
  auto until = Clock::now() + 10s;
  while (checks < 2 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  CHECK(checks >= 2);  // at 20 ms and 100 ms
  CHECK(engine.failure().is_ok());
  fail = true;
  Status st = engine.check_idle(1s);
  CHECK(st.code() == ErrorCode::Mismatch);
  CHECK(engine.failure().code() == ErrorCode::Mismatch);
  Record later;
  CHECK(
      wait(engine.submit(std::make_unique<FakeTask>(later, 1, Deadline::after(30s))), 30s).code() ==
      ErrorCode::Mismatch);
  CHECK_FALSE(later.finished);
}

// ---- submit_inline: small calls run where they are called while the engine is idle ----

namespace {

class FailingTask final : public ex::Task {
 public:
  Status start(Deadline) override { return Status::ok(); }
  Result<ex::Progress> progress() override {
    return Status(ErrorCode::Mismatch, "fake op: rank 1 sent another call");
  }
  bool prepare_wait(std::vector<pollfd>&) override { return true; }
  [[nodiscard]] std::string describe() const override { return "failing op"; }
  [[nodiscard]] std::string pending() const override { return "nothing"; }
  [[nodiscard]] Deadline deadline() const override { return Deadline::after(60s); }
};

}  // namespace

TEST_CASE("engine: submit_inline finishes a ready operation on the calling thread, unqueued",
          "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));
  Record a, b;
  auto first = engine.submit_inline(std::make_unique<FakeTask>(a, 3, Deadline::after(30s)), 0us);
  auto second = engine.submit_inline(std::make_unique<FakeTask>(b, 1, Deadline::after(30s)), 0us);
  CHECK(first->done);
  CHECK(first->status.is_ok());
  CHECK(a.finished);
  CHECK(a.started_by.load() == std::this_thread::get_id());
  CHECK(first->engine.expired());  // never queued: Work::wait returns at once
  CHECK(first == second);          // one shared completed state, no allocation per call
}

TEST_CASE("engine: an inline operation not done within its budget goes first in the queue",
          "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));
  Record rec;
  std::atomic<bool> ready{false};
  auto op =
      engine.submit_inline(std::make_unique<FakeTask>(rec, 2, Deadline::after(30s), &ready), 200us);
  CHECK_FALSE(op->done);
  CHECK_FALSE(rec.finished);
  CHECK_FALSE(op->engine.expired());  // queued: waiting for it drives it
  ready = true;
  REQUIRE(wait(op, 30s).is_ok());
  CHECK(rec.finished);
  CHECK(rec.starts == 1);  // started inline once; the queue went on from there
}

TEST_CASE("engine: submit_inline behind a queued operation queues after it", "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));
  std::atomic<int> order{0};
  Record earlier, later;
  earlier.order = later.order = &order;
  std::atomic<bool> ready{false};
  auto first = engine.submit(std::make_unique<FakeTask>(earlier, 1, Deadline::after(30s), &ready));
  auto second =
      engine.submit_inline(std::make_unique<FakeTask>(later, 1, Deadline::after(30s)), 200us);
  CHECK_FALSE(later.finished);  // not run ahead of the queue
  CHECK(later.starts == 0);
  ready = true;
  REQUIRE(wait(second, 30s).is_ok());
  CHECK(earlier.finished_as == 0);
  CHECK(later.finished_as == 1);
  CHECK(first->done);
}

// A task that finished where it was submitted stays with its caller (to be reused); any other
// is told (Task::queued(), once, on the submitting thread) before the engine can run it.
TEST_CASE("engine: submit_inline_keeping leaves a finished task with its caller", "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));
  Record done;
  std::unique_ptr<ex::Task> task = std::make_unique<FakeTask>(done, 2, Deadline::after(30s));
  ex::Task* const made = task.get();
  auto op = engine.submit_inline_keeping(task, 0us, Clock::now());
  CHECK(op->done);
  CHECK(task.get() == made);  // the caller's still
  CHECK(done.queued == 0);

  Record late;
  std::atomic<bool> ready{false};
  task = std::make_unique<FakeTask>(late, 1, Deadline::after(30s), &ready);
  op = engine.submit_inline_keeping(task, 100us, Clock::now());
  CHECK(task == nullptr);  // the engine's now
  CHECK_FALSE(op->done);
  CHECK(late.queued == 1);
  CHECK(late.queued_by.load() == std::this_thread::get_id());
  CHECK(late.starts_when_queued == 1);  // started inline first

  Record behind;  // the engine is busy: queued without running here, told first
  task = std::make_unique<FakeTask>(behind, 1, Deadline::after(30s));
  auto second = engine.submit_inline_keeping(task, 100us, Clock::now());
  CHECK(task == nullptr);
  CHECK(behind.queued == 1);
  CHECK(behind.starts_when_queued == 0);
  ready = true;
  REQUIRE(wait(second, 30s).is_ok());
  CHECK(late.finished);
  CHECK(behind.finished);
  CHECK(late.queued == 1);
  CHECK(behind.queued == 1);
}

TEST_CASE("engine: an operation that fails inline fails the engine like a queued one", "[engine]") {
  ex::Engine engine(options(std::chrono::seconds(600)));
  auto op = engine.submit_inline(std::make_unique<FailingTask>(), 0us);
  REQUIRE(op->done);
  CHECK(op->status.code() == ErrorCode::Mismatch);
  CHECK(op->status.message().find("rank 1 sent another call") != std::string::npos);
  CHECK(engine.failure().code() == ErrorCode::Mismatch);
  Record rec;
  auto after = engine.submit_inline(std::make_unique<FakeTask>(rec, 1, Deadline::after(30s)), 0us);
  CHECK(wait(after, 5s).code() == ErrorCode::Mismatch);  // failed earlier: not run
  CHECK_FALSE(rec.finished);
}

// An inline call that runs past park_after while idle checks are still due: the worker must
// keep off the lock's way (it once waited on a predicate that was already true, holding the lock
// for good, so the caller could never take it back to finish its call).
TEST_CASE("engine: a long inline call while idle checks are due finishes", "[engine]") {
  ex::EngineOptions o = options(100us);
  o.park_after = 5ms;
  o.idle_check_after = 20ms;
  o.idle_check = [] { return Status::ok(); };
  ex::Engine engine(o);
  Record first;
  REQUIRE(wait(engine.submit(std::make_unique<FakeTask>(first, 1, Deadline::after(30s))), 30s)
              .is_ok());  // idle checks are due from now on
  std::atomic<bool> ready{false};
  std::atomic<bool> returned{false};
  Record rec;
  std::thread caller([&] {
    auto op =
        engine.submit_inline(std::make_unique<FakeTask>(rec, 1, Deadline::after(30s), &ready), 10s);
    returned = true;
  });
  std::this_thread::sleep_for(200ms);  // past park_after and the first idle check's time
  ready = true;
  auto until = Clock::now() + 10s;
  while (!returned && Clock::now() < until) std::this_thread::sleep_for(5ms);
  if (!returned) {  // the caller is stuck on the engine's lock: nothing else can end this test
    FAIL_CHECK("submit_inline did not return within 10 s of its operation finishing");
    std::_Exit(1);
  }
  caller.join();
  CHECK(rec.finished);
}
