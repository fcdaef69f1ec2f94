// The executor's fences (exec::LocalOps, docs/gpu.md "FI_HMEM"): when local steps only queue
// work on a device stream, a connection that touches memory itself (a NIC: not stream-ordered)
// must not read what the stream has not written yet, nor overwrite what it has not read yet;
// and what the NIC wrote is flushed before queued work reads it. A hand-run stream and a fake
// connection show each rule, and that stream-ordered connections (cuda_ipc) skip the fences.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "executor/plan_run.hpp"

using namespace loom;
namespace tp = loom::transport;

namespace {

// Requests complete when the test says so; posts are recorded.
class FakeConnection final : public tp::Connection {
 public:
  FakeConnection(int peer, bool stream_ordered) : peer_(peer), ordered_(stream_ordered) {}
  struct Posted {
    bool send = false;
    tp::MemRegion region;
    std::size_t off = 0;
    std::size_t len = 0;
    std::uint64_t id = 0;
  };
  [[nodiscard]] tp::Caps caps() const override {
    tp::Caps c;
    c.stream_ordered = ordered_;
    return c;
  }
  [[nodiscard]] int peer() const override { return peer_; }
  [[nodiscard]] std::string name() const override { return "fake"; }
  Result<tp::Request> isend(const tp::MemRegion& r, std::size_t off, std::size_t len,
                            const tp::Tag&) override {
    posted.push_back({true, r, off, len, ++next_});
    return tp::Request{next_};
  }
  Result<tp::Request> irecv(const tp::MemRegion& r, std::size_t off, std::size_t len,
                            const tp::Tag&) override {
    posted.push_back({false, r, off, len, ++next_});
    return tp::Request{next_};
  }
  Result<bool> test(const tp::Request& r) override { return done.count(r.id) != 0; }
  bool prepare_wait(std::vector<pollfd>&) override { return true; }

  [[nodiscard]] const Posted* find(bool send) const {
    for (const auto& p : posted)
      if (p.send == send) return &p;
    return nullptr;
  }
  std::vector<Posted> posted;
  std::set<std::uint64_t> done;

 private:
  int peer_;
  bool ordered_;
  std::uint64_t next_ = 0;
};

// A device stream run by hand: copy() and reduce() only queue; run() executes what is queued.
class HeldStream final : public exec::LocalOps {
 public:
  Status copy(void* dst, const void* src, std::size_t bytes) override {
    queue_.emplace_back([=, this] {
      std::memmove(dst, src, bytes);
      log.emplace_back("copy");
    });
    return Status::ok();
  }
  Status reduce(DataType, RedOp, void* dst, const void* a, const void* b,
                std::size_t count) override {
    queue_.emplace_back([=, this] {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < count; ++i)
        d[i] = static_cast<std::uint8_t>(static_cast<const std::uint8_t*>(a)[i] +
                                         static_cast<const std::uint8_t*>(b)[i]);
      log.emplace_back("reduce");
    });
    log.emplace_back("reduce queued");
    return Status::ok();
  }
  [[nodiscard]] bool queues_on_stream() const override { return true; }
  Status record_fence() override {
    fence_at_ = queue_.size();
    ++fences;
    return Status::ok();
  }
  Result<bool> fence_passed() override { return ran_ >= fence_at_; }
  Status remote_write_landed() override {
    log.emplace_back("flush");
    return Status::ok();
  }
  void run() {
    for (; ran_ < queue_.size(); ++ran_) queue_[ran_]();
  }
  std::vector<std::string> log;
  int fences = 0;

 private:
  std::vector<std::function<void()>> queue_;
  std::size_t ran_ = 0;
  std::size_t fence_at_ = 0;
};

constexpr std::size_t kBytes = 8;

// rank 0 of 2: recv = send (copy), send recv to rank 1, receive rank 1's part into scratch,
// recv = recv + scratch once the send has read recv (its Reduce depends on both).
algo::Plan two_step_plan() {
  algo::Plan p;
  const algo::Span send{algo::BufId::Send, 0, kBytes}, recv{algo::BufId::Recv, 0, kBytes},
      scratch{algo::BufId::Scratch, 0, kBytes};
  std::uint32_t copy = p.add(algo::copy_into(recv, send));
  std::uint32_t out = p.add(algo::send_to(1, recv), {copy});
  std::uint32_t in = p.add(algo::recv_from(1, scratch));
  p.add(algo::reduce_into(recv, recv, scratch), {out, in});
  p.scratch_bytes = kBytes;
  return p;
}

struct Fixture {
  explicit Fixture(bool stream_ordered) : conn(1, stream_ordered) {
    for (std::size_t i = 0; i < kBytes; ++i) send[i] = static_cast<std::uint8_t>(i + 1);
    op.kind = coll::CollKind::AllReduce;
    op.dtype = DataType::Uint8;
    op.count = kBytes;
    op.send = send.data();
    op.recv = recv.data();
    bufs.send = send.data();
    bufs.recv = recv.data();
    bufs.scratch = scratch.data();
    bufs.send_bytes = bufs.recv_bytes = bufs.scratch_bytes = kBytes;
    bufs.space = tp::MemoryKind::Device;
    bufs.device = 3;
    bufs.send_id = 11;
    bufs.recv_id = 12;
    bufs.scratch_id = 13;
  }
  exec::PlanRun run(HeldStream& stream) {
    return {plan, bufs, op, 0, {nullptr, &conn}, 4, &stream};
  }
  std::vector<std::uint8_t> send = std::vector<std::uint8_t>(kBytes);
  std::vector<std::uint8_t> recv = std::vector<std::uint8_t>(kBytes, 0);
  std::vector<std::uint8_t> scratch = std::vector<std::uint8_t>(kBytes, 0);
  algo::Plan plan = two_step_plan();
  coll::OpDesc op;
  exec::PlanBuffers bufs;
  FakeConnection conn;
};

exec::Progress progress(exec::PlanRun& run) {
  auto r = run.progress();
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace

TEST_CASE("fences: a NIC send waits until the stream has run the copy that feeds it",
          "[executor][fence]") {
  Fixture f(false);
  HeldStream stream;
  auto run = f.run(stream);
  progress(run);
  REQUIRE(f.conn.find(false) != nullptr);  // the receive depends on nothing: posted at once
  CHECK(f.conn.find(true) == nullptr);     // the send would read recv before the copy ran
  CHECK(stream.fences == 1);
  std::vector<pollfd> fds;
  CHECK(run.prepare_wait(fds));  // nothing to block on: a timed wake-up while the fence is out
  REQUIRE(fds.size() == 1);
  CHECK(fds[0].fd == -1);
  CHECK_THAT(run.pending(), Catch::Matchers::Contains("fence"));
  progress(run);
  CHECK(f.conn.find(true) == nullptr);  // still held
  CHECK(stream.fences == 1);            // one fence in flight at a time
  stream.run();
  progress(run);
  const auto* sent = f.conn.find(true);
  REQUIRE(sent != nullptr);
  CHECK(f.recv[0] == 1);  // the copy ran before the NIC reads recv
  // The whole device buffer, with its allocation id, and the span's offset in it.
  CHECK(sent->region.base == f.recv.data());
  CHECK(sent->region.size == kBytes);
  CHECK(sent->region.space == tp::MemoryKind::Device);
  CHECK(sent->region.device == 3);
  CHECK(sent->region.alloc_id == 12);
  CHECK(sent->off == 0);
  CHECK(sent->len == kBytes);
}

TEST_CASE("fences: what the NIC received is flushed before the reduction that reads it",
          "[executor][fence]") {
  Fixture f(false);
  HeldStream stream;
  auto run = f.run(stream);
  progress(run);
  stream.run();
  progress(run);
  std::memset(f.scratch.data(), 5, kBytes);  // the NIC writes the peer's data
  for (const auto& p : f.conn.posted) f.conn.done.insert(p.id);
  CHECK(progress(run) == exec::Progress::Done);
  stream.run();
  REQUIRE(stream.log == std::vector<std::string>{"copy", "flush", "reduce queued", "reduce"});
  for (std::size_t i = 0; i < kBytes; ++i) CHECK(f.recv[i] == i + 1 + 5);
}

TEST_CASE("fences: a receive into memory the stream still reads waits for the stream",
          "[executor][fence]") {
  // Scratch is reused: the second receive into it must wait until the queued reduction that
  // reads the first one has run (a write-after-read hazard the plan's dependency alone does not
  // cover, since the reduction "completed" when it was queued).
  algo::Plan p;
  const algo::Span recv{algo::BufId::Recv, 0, kBytes}, scratch{algo::BufId::Scratch, 0, kBytes};
  std::uint32_t in1 = p.add(algo::recv_from(1, scratch));
  std::uint32_t red = p.add(algo::reduce_into(recv, recv, scratch), {in1});
  p.add(algo::recv_from(1, scratch), {red});
  p.scratch_bytes = kBytes;
  Fixture f(false);
  f.plan = p;
  HeldStream stream;
  auto run = f.run(stream);
  progress(run);
  REQUIRE(f.conn.posted.size() == 1);
  f.conn.done.insert(f.conn.posted[0].id);
  progress(run);                     // the reduction is queued, not run
  CHECK(f.conn.posted.size() == 1);  // so the second receive may not overwrite scratch
  stream.run();
  progress(run);
  CHECK(f.conn.posted.size() == 2);
}

TEST_CASE("fences: stream-ordered connections (cuda_ipc) need none", "[executor][fence]") {
  Fixture f(true);
  HeldStream stream;
  auto run = f.run(stream);
  progress(run);
  CHECK(f.conn.find(true) != nullptr);  // posted behind the queued copy, on the same stream
  CHECK(stream.fences == 0);
  for (const auto& p : f.conn.posted) f.conn.done.insert(p.id);
  CHECK(progress(run) == exec::Progress::Done);
  stream.run();
  CHECK(stream.log == std::vector<std::string>{"reduce queued", "copy", "reduce"});
}

TEST_CASE("host buffers: regions are whole buffers and nothing is fenced", "[executor][fence]") {
  Fixture f(false);
  f.bufs.space = tp::MemoryKind::Host;
  f.bufs.recv_bytes = 0;  // unknown size: the span alone
  exec::PlanRun run(f.plan, f.bufs, f.op, 0, {nullptr, &f.conn}, 4);
  progress(run);
  const auto* sent = f.conn.find(true);
  REQUIRE(sent != nullptr);
  CHECK(sent->region.space == tp::MemoryKind::Host);
  CHECK(sent->region.base == f.recv.data());
  CHECK(sent->region.size == kBytes);
  CHECK(sent->off == 0);
  const auto* got = f.conn.find(false);
  REQUIRE(got != nullptr);
  CHECK(got->region.base == f.scratch.data());
  CHECK(got->region.size == kBytes);
}
