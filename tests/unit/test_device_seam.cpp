// The device seam and its host simulation: memory kinds, stream ordering, events, kernel
// launches, the NCCL-style enqueue semantics of stream-ordered collectives, buffer-mixing
// errors, and the CUDA IPC handle exchange with peer-access probing.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "device/ipc_peers.hpp"
#include "device/stream_path.hpp"
#include "kernels/host/reduce.hpp"

using namespace loom;

namespace {

// The cuda_ipc FIFO route (whose Work completes with the collective); test_peer_read.cpp has the
// peer-read route's stream semantics.
const std::map<std::string, std::string> kSeamSim = {{"LOOM_DEVICE", "host-sim"},
                                                     {"LOOM_CUDA_IPC_PEER_READ", "off"}};
Deadline seam_soon() {
  return Deadline::after(std::chrono::seconds(30));
}

/// A host function that holds a stream until the test releases it (bounded).
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  static void fn(void* arg) {
    auto* h = static_cast<Hold*>(arg);
    std::unique_lock lk(h->mu);
    h->cv.wait_for(lk, std::chrono::seconds(30), [&] { return h->released; });
  }
  void release() {
    {
      std::lock_guard lk(mu);
      released = true;
    }
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("host-sim: memory kinds, in-order streams, events", "[device]") {
  device::Device& dev = device::host_sim();
  CHECK(dev.name() == "host-sim");
  void* d = value_or_throw(dev.alloc(1000));
  std::vector<int> host(250, 7);
  CHECK(value_or_throw(dev.pointer_kind(d)) == device::MemoryKind::Device);
  CHECK(value_or_throw(dev.pointer_kind(static_cast<char*>(d) + 999)) ==
        device::MemoryKind::Device);
  CHECK(value_or_throw(dev.pointer_kind(host.data())) == device::MemoryKind::Host);
  void* pinned = value_or_throw(dev.alloc_pinned(100));
  CHECK(value_or_throw(dev.pointer_kind(pinned)) == device::MemoryKind::Host);

  device::Stream s = value_or_throw(dev.create_stream());
  device::Event e = value_or_throw(dev.create_event());
  CHECK(value_or_throw(dev.query(e)));  // never recorded: complete
  Hold hold;
  throw_if_error(dev.launch_host_fn(s, &Hold::fn, &hold));
  throw_if_error(dev.copy_async(d, host.data(), 1000, s));
  throw_if_error(dev.record(e, s));
  CHECK_FALSE(value_or_throw(dev.query(e)));  // held behind the host function
  CHECK(dev.synchronize(s, Deadline::after(std::chrono::milliseconds(20))).code() ==
        ErrorCode::Timeout);
  hold.release();
  throw_if_error(dev.synchronize(s, seam_soon()));
  CHECK(value_or_throw(dev.query(e)));
  CHECK(std::memcmp(d, host.data(), 1000) == 0);

  // Kernel launch: the CUDA kernels' logic, on the stream.
  std::vector<float> a(1001), b(1001), want(1001);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(3 * i % 17);
  }
  kernels::reduce(DataType::Float32, RedOp::Max, want.data(), a.data(), b.data(), a.size());
  throw_if_error(
      dev.reduce_async(DataType::Float32, RedOp::Max, a.data(), a.data(), b.data(), a.size(), s));
  throw_if_error(dev.divide_async(DataType::Float32, a.data(), a.size(), 1, s));
  throw_if_error(dev.synchronize(s, seam_soon()));
  CHECK(a == want);

  dev.destroy_event(e);
  dev.destroy_stream(s);
  dev.free_pinned(pinned);
  dev.free(d);
  CHECK(value_or_throw(dev.pointer_kind(d)) == device::MemoryKind::Host);
}

TEST_CASE("host-sim: an event may be destroyed while its record is queued (as in CUDA)",
          "[device]") {
  device::Device& dev = device::host_sim();
  device::Stream s = value_or_throw(dev.create_stream());
  Hold hold;
  throw_if_error(dev.launch_host_fn(s, &Hold::fn, &hold));
  for (int i = 0; i < 8; ++i) {
    device::Event e = value_or_throw(dev.create_event());
    throw_if_error(dev.record(e, s));
    dev.destroy_event(e);  // a failed collective drops its events with work still queued
  }
  hold.release();
  throw_if_error(dev.synchronize(s, seam_soon()));  // the stream drains; nothing touches freed events
  dev.destroy_stream(s);
}

TEST_CASE("host-sim: allocation ids tell a reallocation at the same address apart", "[device]") {
  device::Device& dev = device::host_sim();
  void* a = value_or_throw(dev.alloc(4096));
  const std::uint64_t id = dev.allocation_id(a);
  CHECK(id != 0);
  CHECK(dev.allocation_id(static_cast<char*>(a) + 4095) == id);
  std::vector<int> host(4);
  CHECK(dev.allocation_id(host.data()) == 0);
  dev.free(a);
  CHECK(dev.allocation_id(a) == 0);
  void* b = value_or_throw(dev.alloc(4096));
  CHECK(dev.allocation_id(b) != id);  // even where b == a
  dev.free(b);
}

TEST_CASE("host-sim: allocation() gives an interior pointer's base, size and id", "[device]") {
  device::Device& dev = device::host_sim();
  auto* a = static_cast<std::uint8_t*>(value_or_throw(dev.alloc(5000)));
  const device::Allocation got = value_or_throw(dev.allocation(a + 4321));
  CHECK(got.base == a);
  CHECK(got.bytes == 5000);
  CHECK(got.id == dev.allocation_id(a));
  std::vector<int> host(4);
  CHECK(dev.allocation(host.data()).status().code() == ErrorCode::InvalidArgument);
  dev.free(a);
}

// The peer-read route's stream operations: a written word follows the work before it; a wait
// for another stream's event holds only the work after it; the multi-buffer kernel reduces in
// rank order, writes every destination, and skips once its ticket is abandoned.
TEST_CASE("host-sim: write_value, wait_event and the multi-buffer kernel, in stream order",
          "[device]") {
  device::Device& dev = device::host_sim();
  device::Stream s = value_or_throw(dev.create_stream());
  device::Stream t = value_or_throw(dev.create_stream());
  auto* word = static_cast<std::uint32_t*>(value_or_throw(dev.alloc_pinned(64)));
  std::atomic_ref<std::uint32_t> w(*word);
  w.store(0);
  Hold hold;
  std::vector<std::int32_t> a(1000, 3), b(1000, 4), c(1000, 5), d1(1000, 0), d2(1000, 0);
  throw_if_error(dev.launch_host_fn(s, &Hold::fn, &hold));
  throw_if_error(dev.write_value(s, word, 7));  // after the held work
  device::Event e = value_or_throw(dev.create_event());
  throw_if_error(dev.record(e, s));
  throw_if_error(dev.wait_event(t, e));  // t's next work waits for s
  device::MultiReduce m;
  m.dtype = DataType::Int32;
  m.op = RedOp::Avg;  // (3 + 4 + 5) / 3
  m.src = {a.data(), b.data(), c.data()};
  m.nsrc = 3;
  m.dst = {d1.data(), d2.data()};
  m.ndst = 2;
  m.count = 1000;
  m.divide_by = 3;
  throw_if_error(dev.reduce_multi_async(m, t));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(w.load() == 0);
  CHECK(std::atomic_ref<std::int32_t>(d1[0]).load() == 0);
  hold.release();
  throw_if_error(dev.synchronize(t, seam_soon()));
  CHECK(w.load() == 7);
  CHECK((d1 == std::vector<std::int32_t>(1000, 4) && d2 == d1));
  // Abandoned from ticket 5 on: a launch of ticket 6 does nothing, one of ticket 4 runs.
  w.store(5);
  m.skip_word = word;
  m.ticket = 6;
  m.op = RedOp::Max;
  m.divide_by = 0;
  throw_if_error(dev.reduce_multi_async(m, t));
  throw_if_error(dev.synchronize(t, seam_soon()));
  CHECK(d1[0] == 4);
  m.ticket = 4;
  throw_if_error(dev.reduce_multi_async(m, t));
  throw_if_error(dev.synchronize(t, seam_soon()));
  CHECK(d1[0] == 5);
  m.nsrc = 0;
  CHECK(dev.reduce_multi_async(m, t).code() == ErrorCode::InvalidArgument);
  dev.destroy_event(e);
  dev.destroy_stream(s);
  dev.destroy_stream(t);
  dev.free_pinned(word);
}

TEST_CASE("host-sim: kernels launch on a stream of the current device only (as in CUDA)",
          "[device]") {
  device::Device& dev = device::host_sim();
  throw_if_error(dev.set_device(2));
  device::Stream s = value_or_throw(dev.create_stream());
  std::vector<float> x(16, 1.0f);
  throw_if_error(
      dev.reduce_async(DataType::Float32, RedOp::Sum, x.data(), x.data(), x.data(), x.size(), s));
  throw_if_error(dev.set_device(0));
  Status st =
      dev.reduce_async(DataType::Float32, RedOp::Sum, x.data(), x.data(), x.data(), x.size(), s);
  CHECK(st.code() == ErrorCode::InvalidUsage);
  CHECK_THAT(st.message(), Catch::Matchers::Contains("device 2") &&
                               Catch::Matchers::Contains("device 0 is current"));
  throw_if_error(dev.synchronize(s, seam_soon()));
  CHECK(x[0] == 2.0f);
  dev.destroy_stream(s);
}

TEST_CASE("host-sim: a stream waits for a memory word to reach a value, cyclically", "[device]") {
  device::Device& dev = device::host_sim();
  device::Stream s = value_or_throw(dev.create_stream());
  auto* word = static_cast<std::uint32_t*>(value_or_throw(dev.alloc_pinned(sizeof(std::uint32_t))));
  std::atomic_ref<std::uint32_t> w(*word);
  w.store(0xfffffffeU);
  int marker = 0;
  int one = 1;
  throw_if_error(dev.wait_value(s, word, 1));  // 2 after 0xfffffffe (wraps)
  throw_if_error(dev.copy_async(&marker, &one, sizeof one, s));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w.store(0xffffffffU);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(std::atomic_ref<int>(marker).load() == 0);  // still before the value
  w.store(1);
  throw_if_error(dev.synchronize(s, seam_soon()));
  CHECK(marker == 1);
  dev.destroy_stream(s);
  dev.free_pinned(word);
}

TEST_CASE("stream gates: a wait-value line opens its word over contiguous tickets only",
          "[device]") {
  device::Device& dev = device::host_sim();
  auto line = value_or_throw(device::GateLine::create(dev, seam_soon()));
  std::atomic_ref<std::uint32_t> word(*const_cast<std::uint32_t*>(line->word()));  // read only
  auto first = std::make_shared<device::Gate>(seam_soon(), line);
  auto second = std::make_shared<device::Gate>(seam_soon(), line);
  auto third = std::make_shared<device::Gate>(seam_soon(), line);
  CHECK(first->value() == 1);
  CHECK(third->value() == 3);
  second->open();
  CHECK(word.load() == 0);  // the first is still closed: its stream must stay held
  first->open();
  CHECK(word.load() == 2);
  third.reset();  // a gate dropped unopened opens (its call failed or was never enqueued)
  CHECK(word.load() == 3);
  first->open();  // opening twice changes nothing
  CHECK(word.load() == 3);
}

TEST_CASE("device collectives: the call returns once enqueued, later stream work sees the result",
          "[device]") {
  auto wait_value = kSeamSim;
  wait_value["LOOM_STREAM_GATE"] = "wait-value";
  for (const auto& settings : {kSeamSim, wait_value}) {
    INFO("LOOM_STREAM_GATE=" << (settings.count("LOOM_STREAM_GATE") ? "wait-value" : "default"));
    loom::test::run_ranks(
        2,
        [](Communicator& comm) {
          device::Device& dev = device::host_sim();
          device::Stream s = value_or_throw(dev.create_stream());
          const std::size_t n = 4099;
          auto* buf = static_cast<std::int32_t*>(value_or_throw(dev.alloc(n * 4)));
          std::vector<std::int32_t> in(n), out(n, -1);
          for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(i) + comm.rank();
          Hold hold;  // the stream has not produced the input yet
          throw_if_error(dev.launch_host_fn(s, &Hold::fn, &hold));
          throw_if_error(dev.copy_async(buf, in.data(), n * 4, s));
          CollOptions o;
          o.stream = s;
          Work w = comm.allreduce(buf, buf, n, DataType::Int32, RedOp::Sum, o);
          throw_if_error(dev.copy_async(out.data(), buf, n * 4, s));
          // Returned although the stream is held: the collective cannot have run yet.
          CHECK_FALSE(w.test());
          CHECK(out[0] == -1);
          hold.release();
          throw_if_error(dev.synchronize(s, seam_soon()));
          w.wait();
          for (std::size_t i = 0; i < n; ++i)
            REQUIRE(out[i] == 2 * static_cast<std::int32_t>(i) + 1);
          dev.free(buf);
          dev.destroy_stream(s);
        },
        settings);
  }
}

TEST_CASE("device collectives: many calls in flight on one stream (staging pool reuse)",
          "[device]") {
  loom::test::run_ranks(
      3,
      [](Communicator& comm) {
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        constexpr int kCalls = 12;  // more than the staging pool holds
        const std::size_t n = 10007;
        std::vector<std::int64_t*> bufs;
        std::vector<std::vector<std::int64_t>> outs(kCalls, std::vector<std::int64_t>(n, -1));
        std::vector<std::int64_t> in(n);
        CollOptions o;
        o.stream = s;
        for (int c = 0; c < kCalls; ++c) {
          for (std::size_t i = 0; i < n; ++i)
            in[i] = static_cast<std::int64_t>(i) * (c + 1) + comm.rank();
          auto* b = static_cast<std::int64_t*>(value_or_throw(dev.alloc(n * 8)));
          bufs.push_back(b);
          throw_if_error(dev.copy_async(b, in.data(), n * 8, s));
          throw_if_error(dev.synchronize(s, seam_soon()));  // `in` is reused for the next call
          comm.allreduce(b, b, n, DataType::Int64, RedOp::Sum, o);
          throw_if_error(dev.copy_async(outs[static_cast<std::size_t>(c)].data(), b, n * 8, s));
        }
        throw_if_error(dev.synchronize(s, seam_soon()));
        for (int c = 0; c < kCalls; ++c)
          for (std::size_t i = 0; i < n; ++i)
            REQUIRE(outs[static_cast<std::size_t>(c)][i] ==
                    3 * static_cast<std::int64_t>(i) * (c + 1) + 3);
        for (auto* b : bufs) dev.free(b);
        dev.destroy_stream(s);
      },
      kSeamSim);
}

TEST_CASE("device collectives: mixing host and device buffers is InvalidArgument naming both",
          "[device]") {
  loom::test::run_ranks(
      1,
      [](Communicator& comm) {
        device::Device& dev = device::host_sim();
        void* d = value_or_throw(dev.alloc(64));
        std::vector<float> h(16);
        try {
          comm.allreduce(d, h.data(), 16, DataType::Float32, RedOp::Sum);
          FAIL("no error");
        } catch (const Error& e) {
          CHECK(e.code() == ErrorCode::InvalidArgument);
          const std::string msg = e.what();
          CHECK_THAT(msg, Catch::Contains("rank 0") && Catch::Contains("allreduce") &&
                              Catch::Contains("send buffer") && Catch::Contains("device memory") &&
                              Catch::Contains("receive buffer") && Catch::Contains("host memory"));
        }
        CHECK_THROWS_AS(comm.broadcast(h.data(), d, 16, DataType::Float32, 0), Error);
        // Both on the host, no stream: the plain host path still works.
        std::vector<float> h2(16, 1.0f);
        comm.allreduce(h2.data(), h2.data(), 16, DataType::Float32, RedOp::Sum).wait();
        CHECK(h2[15] == 1.0f);
        dev.free(d);
      },
      kSeamSim);
}

TEST_CASE("device collectives: a stream without a device runtime is InvalidArgument", "[device]") {
  loom::test::run_ranks(1,
                        [](Communicator& comm) {
                          std::vector<float> h(4);
                          CollOptions o;
                          o.stream = reinterpret_cast<void*>(0x1234);
                          try {
                            comm.allreduce(h.data(), h.data(), 4, DataType::Float32, RedOp::Sum, o);
                            FAIL("no error");
                          } catch (const Error& e) {
                            CHECK(e.code() == ErrorCode::InvalidArgument);
                            CHECK_THAT(std::string(e.what()), Catch::Contains("no device runtime"));
                          }
                        },
                        {{"LOOM_DEVICE", "none"}});
}

TEST_CASE("device selection: LOOM_DEVICE names", "[device]") {
  CHECK(value_or_throw(device::device_by_name("host-sim")) == &device::host_sim());
  CHECK(value_or_throw(device::device_by_name("none")) == nullptr);
  CHECK(device::device_by_name("tpu").status().code() == ErrorCode::InvalidUsage);
#if !defined(LOOM_HAVE_CUDA)
  CHECK(value_or_throw(device::device_by_name("auto")) == nullptr);
  CHECK(device::device_by_name("cuda").status().code() == ErrorCode::InvalidUsage);
#endif
}

TEST_CASE("device registry: a registered runtime is found by name; no device is an error",
          "[device]") {
  static device::Device* fake = nullptr;  // what the test runtime's factory returns
  device::register_runtime("test-registry", [] { return fake; });
  auto missing = device::device_by_name("test-registry");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::InvalidUsage);
  CHECK_THAT(missing.status().message(), Catch::Contains("LOOM_DEVICE=test-registry"));
  fake = &device::host_sim();
  CHECK(value_or_throw(device::device_by_name("test-registry")) == &device::host_sim());
  // A second registration replaces the first.
  device::register_runtime("test-registry", [] { return static_cast<device::Device*>(nullptr); });
  CHECK_FALSE(device::device_by_name("test-registry").is_ok());
  // host-sim came in with the testing library this binary links, before main().
  CHECK(value_or_throw(device::device_by_name("host-sim"))->name() == "host-sim");
}

TEST_CASE("CUDA IPC exchange: peer access probed, P2P buffers mapped, others staged", "[device]") {
  device::Device& dev = device::host_sim();  // 8 devices; P2P within {0..3} and {4..7}
  constexpr int kRanks = 9;                  // ranks 0..7 on host "a" (device = rank), 8 on "b"
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::int32_t*> bufs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    bufs[static_cast<std::size_t>(r)] = static_cast<std::int32_t*>(value_or_throw(dev.alloc(64)));
    *bufs[static_cast<std::size_t>(r)] = 100 + r;
  }
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      const auto ur = static_cast<std::size_t>(r);
      const std::string host = r < 8 ? "a" : "b";
      auto peers = device::IpcPeers::exchange(dev, *store, "test/", r, kRanks, host, r % 8,
                                              bufs[ur], seam_soon());
      if (!peers.is_ok()) {
        errors[ur] = peers.status().message();
        return;
      }
      for (int q = 0; q < kRanks; ++q) {
        const device::PeerBuffer& p = peers->peer(q);
        device::PeerRoute want = device::PeerRoute::Remote;
        if (q == r)
          want = device::PeerRoute::Self;
        else if ((q < 8) == (r < 8))
          want = (q / 4 == r / 4) ? device::PeerRoute::PeerToPeer : device::PeerRoute::HostStaging;
        if (r == 8 && q != 8) want = device::PeerRoute::Remote;
        if (p.route != want)
          errors[ur] +=
              fmt::format("peer {}: route {} want {}; ", q, to_string(p.route), to_string(want));
        if (want == device::PeerRoute::PeerToPeer &&
            (p.mapped != bufs[static_cast<std::size_t>(q)] ||
             *static_cast<std::int32_t*>(p.mapped) != 100 + q))
          errors[ur] += fmt::format("peer {}: wrong mapping; ", q);
        if (want != device::PeerRoute::PeerToPeer && want != device::PeerRoute::Self &&
            p.mapped != nullptr)
          errors[ur] += fmt::format("peer {}: mapped without P2P; ", q);
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r << ": " << errors[static_cast<std::size_t>(r)]);
    CHECK(errors[static_cast<std::size_t>(r)].empty());
  }
  for (auto* b : bufs) dev.free(b);
}

TEST_CASE("CUDA IPC exchange: a handle that cannot be opened fails naming the peer", "[device]") {
  device::Device& dev = device::host_sim();
  void* mine = value_or_throw(dev.alloc(64));
  void* other = value_or_throw(dev.alloc(64));
  device::IpcHandle h = value_or_throw(dev.ipc_handle(other));
  dev.free(other);  // the handle now names freed memory
  CHECK(dev.ipc_open(h).status().code() == ErrorCode::InvalidArgument);
  // Rank 1's record (this process, device 1, same host, peer access) carries that handle.
  auto record = [&](std::uint32_t pid) {
    device::IpcRecord rec;
    rec.pid = pid;
    rec.device = 1;
    rec.handle = h;
    rec.host = "a";
    rec.bus_id = value_or_throw(dev.pci_bus_id(1));
    for (int d = 0; d < dev.device_count(); ++d)
      rec.visible.push_back(value_or_throw(dev.pci_bus_id(d)));
    return device::encode(rec);
  };
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  const bootstrap::Bytes rec = record(static_cast<std::uint32_t>(::getpid()));
  std::thread peer([&] { (void)bootstrap::store_allgather(*store, "x/ipc/", 1, 2, rec, seam_soon()); });
  auto r = device::IpcPeers::exchange(dev, *store, "x/", 0, 2, "a", 0, mine, seam_soon());
  peer.join();
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("rank 0") && Catch::Contains("peer 1"));
  // The same peer in another process: host-sim cannot open its handles, so it is staged.
  auto store2 = std::make_shared<bootstrap::InMemoryStore>();
  const bootstrap::Bytes foreign = record(1);
  std::thread peer2(
      [&] { (void)bootstrap::store_allgather(*store2, "x/ipc/", 1, 2, foreign, seam_soon()); });
  auto r2 = device::IpcPeers::exchange(dev, *store2, "x/", 0, 2, "a", 0, mine, seam_soon());
  peer2.join();
  REQUIRE(r2.is_ok());
  CHECK(r2->peer(1).route == device::PeerRoute::HostStaging);
  CHECK(r2->peer(1).allows_direct);
  CHECK_THAT(r2->peer(1).why, Catch::Contains("another process"));
  dev.free(mine);
}

TEST_CASE("CUDA IPC records round-trip and reject truncation", "[device]") {
  device::IpcRecord r;
  r.pid = 4242;
  r.device = 3;
  r.handle.bytes[0] = 7;
  r.allows_direct = false;
  r.host = "node-a";
  r.bus_id = "0000:3b:00.0";
  r.visible = {"0000:3b:00.0", "0000:5e:00.0"};
  const bootstrap::Bytes b = device::encode(r);
  device::IpcRecord back = value_or_throw(device::decode_ipc_record(b, 1));
  CHECK(back.pid == 4242);
  CHECK(back.device == 3);
  CHECK(back.handle.bytes[0] == 7);
  CHECK_FALSE(back.allows_direct);
  CHECK(back.host == "node-a");
  CHECK(back.bus_id == "0000:3b:00.0");
  CHECK(back.visible == r.visible);
  CHECK_FALSE(back.stages);
  r.allows_direct = true;
  r.stages = true;
  const device::IpcRecord staged = value_or_throw(device::decode_ipc_record(device::encode(r), 1));
  CHECK(staged.allows_direct);
  CHECK(staged.stages);
  bootstrap::Bytes cut(b.begin(), b.end() - 1);
  auto bad = device::decode_ipc_record(cut, 5);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("rank 5"));
}

namespace {

// Routes seen by each of 4 ranks on one host when rank r's thread sees visible(r) as its GPUs
// and uses its ordinal 0 (as with CUDA_VISIBLE_DEVICES set per rank); rank r's GPU is
// physical r (peer access within {0..3} on host-sim).
std::vector<std::vector<device::PeerBuffer>> routes_with_visibility(
    const std::function<std::vector<int>(int)>& visible) {
  device::Device& dev = device::host_sim();
  constexpr int kRanks = 4;
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<void*> bufs(kRanks);
  for (auto& b : bufs) b = value_or_throw(dev.alloc(64));
  std::vector<std::vector<device::PeerBuffer>> out(kRanks);
  loom::test::on_rank_threads(kRanks, [&](int r) {
    device::host_sim_set_visible_devices(visible(r));
    auto peers = value_or_throw(device::IpcPeers::exchange(
        dev, *store, "vis/", r, kRanks, "a", 0, bufs[static_cast<std::size_t>(r)], seam_soon()));
    for (int q = 0; q < kRanks; ++q) out[static_cast<std::size_t>(r)].push_back(peers.peer(q));
    device::host_sim_set_visible_devices({});
  });
  for (void* b : bufs) dev.free(b);
  return out;
}

}  // namespace

TEST_CASE("CUDA IPC exchange: GPUs are matched by PCI address, not by ordinal", "[device]") {
  device::Device& dev = device::host_sim();
  CHECK(value_or_throw(dev.pci_bus_id(2)) == "0000:12:00.0");
  CHECK(dev.device_of_bus_id("00000000:12:00.0") == 2);
  CHECK(dev.device_of_bus_id("0000:99:00.0") == -1);
  // Every rank sees all 4 GPUs, its own first: each uses "device 0", yet the GPUs differ and
  // peer access holds, so every pair is p2p (ordinals alone would say "same device").
  auto rotated = routes_with_visibility([](int r) {
    std::vector<int> v;
    for (int i = 0; i < 4; ++i) v.push_back((r + i) % 4);
    return v;
  });
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < 4; ++q) {
      const auto& p = rotated[static_cast<std::size_t>(r)][static_cast<std::size_t>(q)];
      INFO("rank " << r << " peer " << q << ": " << p.why);
      CHECK(p.device == 0);
      CHECK(p.bus_id == fmt::format("0000:{:02x}:00.0", 0x10 + q));
      CHECK(p.route == (q == r ? device::PeerRoute::Self : device::PeerRoute::PeerToPeer));
    }
  // Each rank sees only its own GPU: no peer access can be set up; both sides stage.
  auto isolated = routes_with_visibility([](int r) { return std::vector<int>{r}; });
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < 4; ++q) {
      if (q == r) continue;
      const auto& p = isolated[static_cast<std::size_t>(r)][static_cast<std::size_t>(q)];
      CHECK(p.route == device::PeerRoute::HostStaging);
      CHECK_THAT(p.why, Catch::Contains("CUDA_VISIBLE_DEVICES"));
    }
  // Ranks 0 and 1 share GPU 0 (both see only it): the peer's buffer opens on this very device,
  // no peer access needed, whatever the ordinals (2 ranks on one GPU read each other directly).
  auto shared = routes_with_visibility([](int r) { return std::vector<int>{r < 2 ? 0 : r}; });
  CHECK(shared[0][1].route == device::PeerRoute::PeerToPeer);
  CHECK(shared[1][0].route == device::PeerRoute::PeerToPeer);
  CHECK_THAT(shared[0][1].why, Catch::Contains("both on GPU 0000:10:00.0"));
}
