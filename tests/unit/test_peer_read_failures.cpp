// The peer-read route (src/device/peer_read.hpp) on host-sim, ranks as threads: its handle
// cache in use (one open per peer allocation over many calls; an address freed and reallocated
// opened anew, the stale mapping closed; the limit), a buffer that cannot be shared (every rank
// takes the FIFOs for that call), calls that do not match (Mismatch naming both ranks), and
// ranks that stop: one that leaves, one whose stream never reaches the call while it fails, one
// whose stream is stuck past the deadline. Every wait is bounded; no stream is left waiting.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "device_matrix.hpp"
#include "end_together.hpp"

using namespace loom;
using loom::test::Findings;

namespace {

std::map<std::string, std::string> on_with(std::map<std::string, std::string> more = {}) {
  std::map<std::string, std::string> s = {{"LOOM_DEVICE", "host-sim"},
                                          {"LOOM_CUDA_IPC_PEER_READ", "on"}};
  for (auto& [k, v] : more) s[k] = v;
  return s;
}

Deadline pr_soon() {
  return Deadline::after(std::chrono::seconds(30));
}

/// A device buffer of `count` int32 holding i * 7 + rank, on `s`.
std::int32_t* filled(device::Device& dev, device::Stream s, std::size_t count, int rank) {
  auto* p = static_cast<std::int32_t*>(value_or_throw(dev.alloc(count * 4)));
  std::vector<std::int32_t> h(count);
  for (std::size_t i = 0; i < count; ++i) h[i] = static_cast<std::int32_t>(i * 7) + rank;
  throw_if_error(dev.copy_async(p, h.data(), count * 4, s));
  throw_if_error(dev.synchronize(s, pr_soon()));
  return p;
}

/// Whether `p` holds the 2-rank sum of filled() after an in-place allreduce.
std::string check_sum(device::Device& dev, device::Stream s, const std::int32_t* p,
                      std::size_t count, int nranks) {
  std::vector<std::int32_t> h(count);
  throw_if_error(dev.copy_async(h.data(), p, count * 4, s));
  throw_if_error(dev.synchronize(s, pr_soon()));
  for (std::size_t i = 0; i < count; ++i) {
    const auto want = static_cast<std::int32_t>(i * 7 * nranks + nranks * (nranks - 1) / 2);
    if (h[i] != want) return fmt::format("element {}: {} != {}", i, h[i], want);
  }
  return "";
}

}  // namespace

TEST_CASE("peer-read route: a buffer freed and reallocated at its address is opened anew",
          "[device][peer_read]") {
  Findings f;
  std::uint64_t opens_first = 0, opens = 0, closes = 0;
  loom::test::EndTogether::Shared end;
  device::host_sim_reuse_addresses(true);  // a freed block comes back at its address
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        const loom::test::EndTogether together(end, 2);
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const int r = comm.rank();
        const std::size_t n = 1000;
        std::int32_t* x = filled(dev, s, n, r);
        comm.barrier();
        std::uint64_t o0 = device::host_sim_ipc_opens();
        comm.barrier();
        comm.allreduce(x, x, n, DataType::Int32, RedOp::Sum, o);
        if (auto e = check_sum(dev, s, x, n, 2); !e.empty()) f.add("first call: " + e);
        comm.barrier();
        if (r == 0) opens_first = device::host_sim_ipc_opens() - o0;
        o0 = device::host_sim_ipc_opens();
        const std::uint64_t c0 = device::host_sim_ipc_closes();
        comm.barrier();
        for (int k = 0; k < 10; ++k) {
          const void* was = x;
          dev.free(x);  // the stream is synchronised: nothing uses it
          x = filled(dev, s, n, r);
          if (x != was) f.add(fmt::format("rank {}: the address was not reused", r));
          comm.allreduce(x, x, n, DataType::Int32, RedOp::Sum, o);
          if (auto e = check_sum(dev, s, x, n, 2); !e.empty()) f.add("reallocated: " + e);
        }
        comm.barrier();
        if (r == 0) {
          opens = device::host_sim_ipc_opens() - o0;
          closes = device::host_sim_ipc_closes() - c0;
        }
        comm.barrier();
        dev.free(x);
        dev.destroy_stream(s);
      },
      on_with());
  device::host_sim_reuse_addresses(false);
  INFO(f.first);
  CHECK(f.wrong == 0);
  CHECK(opens_first == 2);  // each rank maps the other's one allocation (in place: send = recv)
  CHECK(opens == 20);       // each reallocation is another allocation, opened anew ...
  CHECK(closes == 20);      // ... and the stale mapping of the one before closed
}

TEST_CASE("peer-read route: one buffer used over many calls opens once", "[device][peer_read]") {
  Findings f;
  std::uint64_t opens = 0, launches = 0;
  loom::test::EndTogether::Shared end;
  loom::test::run_ranks(
      3,
      [&](Communicator& comm) {
        const loom::test::EndTogether together(end, 3);
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const std::size_t n = 2000;
        std::int32_t* x = filled(dev, s, n, comm.rank());
        auto* y = static_cast<std::int32_t*>(value_or_throw(dev.alloc(n * 4)));
        comm.allreduce(x, y, n, DataType::Int32, RedOp::Sum, o);  // maps every peer's x and y
        throw_if_error(dev.synchronize(s, pr_soon()));
        comm.barrier();
        const std::uint64_t o0 = device::host_sim_ipc_opens();
        const std::uint64_t l0 = device::host_sim_multi_launches();
        comm.barrier();
        for (int k = 0; k < 20; ++k) comm.allreduce(x, y, n, DataType::Int32, RedOp::Sum, o);
        if (auto e = check_sum(dev, s, y, n, 3); !e.empty()) f.add(e);
        comm.barrier();
        if (comm.rank() == 0) {
          opens = device::host_sim_ipc_opens() - o0;
          launches = device::host_sim_multi_launches() - l0;
        }
        dev.free(x);
        dev.free(y);
        dev.destroy_stream(s);
      },
      on_with());
  INFO(f.first);
  CHECK(f.wrong == 0);
  CHECK(opens == 0);
  CHECK(launches == 60);  // one launch per rank and call
}

TEST_CASE("peer-read route: over LOOM_CUDA_IPC_PEER_CACHE, mappings are closed and reopened",
          "[device][peer_read]") {
  Findings f;
  std::uint64_t opens = 0, closes = 0;
  loom::test::EndTogether::Shared end;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        const loom::test::EndTogether together(end, 2);
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const std::size_t n = 300;
        std::vector<std::int32_t*> bufs;
        for (int b = 0; b < 5; ++b) bufs.push_back(filled(dev, s, n, comm.rank()));
        comm.barrier();
        const std::uint64_t o0 = device::host_sim_ipc_opens(), c0 = device::host_sim_ipc_closes();
        comm.barrier();
        for (int round = 0; round < 3; ++round)
          for (std::int32_t* b : bufs) {
            comm.allreduce(b, b, n, DataType::Int32, RedOp::Max, o);
            throw_if_error(dev.synchronize(s, pr_soon()));  // each call retired before the next
          }
        for (std::int32_t* b : bufs) {
          std::vector<std::int32_t> h(n);
          throw_if_error(dev.copy_async(h.data(), b, n * 4, s));
          throw_if_error(dev.synchronize(s, pr_soon()));
          for (std::size_t i = 0; i < n; ++i)
            if (h[i] != static_cast<std::int32_t>(i * 7) + 1) {
              f.add(fmt::format("rank {} element {}: {}", comm.rank(), i, h[i]));
              break;
            }
        }
        comm.barrier();
        if (comm.rank() == 0) {
          opens = device::host_sim_ipc_opens() - o0;
          closes = device::host_sim_ipc_closes() - c0;
        }
        comm.barrier();
        for (std::int32_t* b : bufs) dev.free(b);
        dev.destroy_stream(s);
      },
      on_with({{"LOOM_CUDA_IPC_PEER_CACHE", "2"}}));
  INFO(f.first);
  CHECK(f.wrong == 0);
  CHECK(opens == 30);              // 5 buffers round robin through 2 mappings: every call misses
  CHECK(opens - closes <= 2 * 3);  // at most the limit open per rank (+1 in use), at any time
}

TEST_CASE("peer-read route: a buffer that cannot be shared takes the FIFOs, on every rank",
          "[device][peer_read]") {
  Findings f;
  const std::uint64_t pairs = device::host_sim_reduce_launches();
  const std::uint64_t multi = device::host_sim_multi_launches();
  loom::test::run_ranks(
      3,
      [&](Communicator& comm) {
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const std::size_t n = 5000;
        std::int32_t* x = filled(dev, s, n, comm.rank());
        if (comm.rank() == 1) device::host_sim_refuse_ipc(x);  // as cudaMallocAsync memory
        comm.allreduce(x, x, n, DataType::Int32, RedOp::Sum, o);
        if (auto e = check_sum(dev, s, x, n, 3); !e.empty()) f.add("fallback: " + e);
        std::int32_t* y = filled(dev, s, n, comm.rank());
        comm.allreduce(y, y, n, DataType::Int32, RedOp::Sum, o);  // back on the route
        if (auto e = check_sum(dev, s, y, n, 3); !e.empty()) f.add("after: " + e);
        dev.free(x);
        dev.free(y);
        dev.destroy_stream(s);
      },
      on_with());
  INFO(f.first);
  CHECK(f.wrong == 0);
  CHECK(device::host_sim_reduce_launches() > pairs);  // the FIFOs' receive-reduce kernels
  CHECK(device::host_sim_multi_launches() == multi + 3);
}

TEST_CASE("peer-read route: calls that differ fail with Mismatch naming both ranks, no hang",
          "[device][peer_read]") {
  Findings f;
  loom::test::run_together(
      2,
      [&](Communicator& comm) {
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const int r = comm.rank();
        std::int32_t* x = filled(dev, s, 400, r);
        const auto t0 = Clock::now();
        auto e = loom::test::error_of([&] {
          comm.allreduce(x, x, r == 0 ? 100 : 200, DataType::Int32, RedOp::Sum, o).wait();
        });
        const std::string other = r == 0 ? "rank 1" : "rank 0";
        if (!loom::test::names(e, ErrorCode::Mismatch, {fmt::format("rank {}", r), other}))
          f.add(fmt::format("rank {}: {}", r, e ? e->what() : "no error"));
        // The stream is not left waiting for the call.
        if (!dev.synchronize(s, Deadline::after(std::chrono::seconds(20))).is_ok())
          f.add(fmt::format("rank {}: the stream still waits", r));
        if (Clock::now() - t0 > std::chrono::seconds(25)) f.add("too slow");
        dev.free(x);
        dev.destroy_stream(s);
      },
      on_with({{"LOOM_TIMEOUT", "20s"}}));
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// Rank 2 leaves with its call on the device while its own stream has not reached it (held):
// ranks 0 and 1, whose streams wait for rank 2's flags, are released once it has left; their
// next call names it. Rank 2's stream is let go once they have checked.
TEST_CASE("peer-read route: a rank that leaves with a call on the device releases the others",
          "[device][peer_read]") {
  Findings f;
  std::atomic<int> checked{0};
  loom::test::StreamHold hold;  // rank 2's stream
  std::thread letgo([&] {
    for (int i = 0; i < 1200 && checked.load() < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    hold.release();
  });
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  loom::test::on_rank_threads(3, [&](int r) {
    device::Device& dev = device::host_sim();
    device::Stream s = value_or_throw(dev.create_stream());
    CollOptions o;
    o.stream = s;
    std::int32_t* x = filled(dev, s, 1000, r);
    {
      Communicator comm =
          loom::test::make_comm(store, r, 3, 0x7300, on_with({{"LOOM_TIMEOUT", "30s"}}));
      comm.barrier();
      if (r == 2) {
        throw_if_error(dev.launch_host_fn(s, &loom::test::StreamHold::fn, &hold));
        comm.allreduce(x, x, 1000, DataType::Int32, RedOp::Sum, o).wait();  // on the device
      } else {
        comm.allreduce(x, x, 1000, DataType::Int32, RedOp::Sum, o).wait();
        const auto t0 = Clock::now();
        if (!dev.synchronize(s, Deadline::after(std::chrono::seconds(25))).is_ok())
          f.add(fmt::format("rank {}: its stream still waits for rank 2", r));
        auto e = loom::test::error_of(
            [&] { comm.allreduce(x, x, 1000, DataType::Int32, RedOp::Sum, o).wait(); });
        if (!loom::test::names(e, ErrorCode::PeerFailed, {"rank 2"}))
          f.add(fmt::format("rank {}: {}", r, e ? e->what() : "no error"));
        if (Clock::now() - t0 > std::chrono::seconds(25)) f.add("too slow");
        ++checked;
      }
    }  // rank 2 leaves here, its call still on the device
    if (!dev.synchronize(s, Deadline::after(std::chrono::seconds(40))).is_ok())
      f.add(fmt::format("rank {}: the stream did not drain", r));
    dev.free(x);
    dev.destroy_stream(s);
  });
  letgo.join();
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// Rank 1's stream is held past the call's deadline: rank 0's call is still on the device then;
// it fails with Timeout naming rank 1's stream, and rank 0's stream is released.
TEST_CASE("peer-read route: a call still on the device at its deadline times out, released",
          "[device][peer_read]") {
  Findings f;
  std::atomic<int> checked{0};
  loom::test::EndTogether::Shared end;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        const loom::test::EndTogether together(end, 2);
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const int r = comm.rank();
        std::int32_t* x = filled(dev, s, 1000, r);
        comm.barrier();
        loom::test::StreamHold hold;
        if (r == 1) throw_if_error(dev.launch_host_fn(s, &loom::test::StreamHold::fn, &hold));
        comm.allreduce(x, x, 1000, DataType::Int32, RedOp::Sum, o).wait();
        if (r == 0) {
          const auto t0 = Clock::now();
          if (!dev.synchronize(s, Deadline::after(std::chrono::seconds(20))).is_ok())
            f.add("rank 0: its stream still waits");
          auto e = loom::test::error_of(
              [&] { comm.allreduce(x, x, 1000, DataType::Int32, RedOp::Sum, o).wait(); });
          if (!loom::test::names(e, ErrorCode::Timeout, {"rank 0", "rank 1's stream"}))
            f.add(fmt::format("rank 0: {}", e ? e->what() : "no error"));
          if (Clock::now() - t0 > std::chrono::seconds(20)) f.add("too slow");
          ++checked;
        } else {
          for (int i = 0; i < 400 && checked.load() < 1; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          hold.release();
          (void)dev.synchronize(s, pr_soon());
        }
        dev.free(x);
        dev.destroy_stream(s);
      },
      on_with({{"LOOM_TIMEOUT", "2s"}}));
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// A rank that leaves before the call: the others' call fails naming it (its card never comes).
TEST_CASE("peer-read route: a rank that leaves is named, the others' streams go on",
          "[device][peer_read]") {
  Findings f;
  loom::test::run_ranks(
      3,
      [&](Communicator& comm) {
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        CollOptions o;
        o.stream = s;
        const int r = comm.rank();
        std::int32_t* x = filled(dev, s, 100, r);
        comm.barrier();
        if (r == 1) {
          dev.free(x);
          dev.destroy_stream(s);
          return;  // leaves
        }
        auto e = loom::test::error_of(
            [&] { comm.allreduce(x, x, 100, DataType::Int32, RedOp::Sum, o).wait(); });
        if (!loom::test::names(e, ErrorCode::PeerFailed, {"rank 1"}))
          f.add(fmt::format("rank {}: {}", r, e ? e->what() : "no error"));
        if (!dev.synchronize(s, Deadline::after(std::chrono::seconds(20))).is_ok())
          f.add(fmt::format("rank {}: its stream still waits", r));
        dev.free(x);
        dev.destroy_stream(s);
      },
      on_with({{"LOOM_TIMEOUT", "30s"}}));
  INFO(f.first);
  CHECK(f.wrong == 0);
}
