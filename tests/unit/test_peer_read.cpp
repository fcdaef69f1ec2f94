// The peer-read route (src/device/peer_read.hpp) on host-sim, ranks as threads: the collective
// matrix exact on it (every collective x dtype x op, in and out of place, uneven and tiny counts,
// 2 ranks on one device and 3 on three), every reduction as one multi-buffer launch and none
// through the FIFOs' kernels; its stream order (a held stream, calls back to back, several
// streams); its agreement (LOOM_CUDA_IPC_PEER_READ); its pure parts (the blocks, the launches,
// the handle caches). Failures and the handle cache in use: test_peer_read_failures.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "device/peer_read_plan.hpp"
#include "device_api/ipc_cache.hpp"
#include "device_matrix.hpp"
#include "end_together.hpp"

using namespace loom;
using loom::test::Findings;
using loom::test::Rank;

namespace {

const std::map<std::string, std::string> kPeerReadOn = {{"LOOM_DEVICE", "host-sim"},
                                                        {"LOOM_CUDA_IPC_PEER_READ", "on"}};

/// The matrix on the route: every reduction a multi-buffer launch, none a two-input kernel
/// (the FIFOs' receive-reduce); the exchanges (all-to-all, gather, scatter, sends) still take
/// the FIFOs in the same communicator, between the route's calls.
void run_matrix(int n, std::vector<int> devices) {
  const std::uint64_t multi = device::host_sim_multi_launches();
  const std::uint64_t pairs = device::host_sim_reduce_launches();
  loom::test::run_device_matrix(n, std::move(devices), kPeerReadOn);
  CHECK(device::host_sim_multi_launches() > multi);
  CHECK(device::host_sim_reduce_launches() == pairs);
}

}  // namespace

TEST_CASE("peer-read route: every collective x dtype x op exact, 2 ranks on one device",
          "[device][peer_read]") {
  run_matrix(2, {0, 0});
}

TEST_CASE("peer-read route: every collective x dtype x op exact, 3 ranks on 3 devices",
          "[device][peer_read]") {
  run_matrix(3, {0, 1, 2});
}

// Five ranks: blocks of 64-byte units, most of them empty for small counts; uneven counts.
TEST_CASE("peer-read route: 5 ranks, uneven and tiny counts", "[device][peer_read]") {
  Findings f;
  loom::test::run_ranks(
      5,
      [&](Communicator& comm) {
        const int n = comm.size(), r = comm.rank();
        Rank dev;
        for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{17},
                                  std::size_t{5 * 16 + 1}, std::size_t{4099}}) {
          std::vector<std::uint8_t> in(count * 4), out(count * 4 * 5);
          for (std::size_t i = 0; i < count; ++i) {
            const auto v = static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(r));
            std::memcpy(in.data() + 4 * i, &v, 4);
          }
          std::uint8_t* d_in = dev.device_copy_of(in);
          std::uint8_t* d_all = dev.device_copy_of(out);
          comm.allreduce(d_in, d_in, count, DataType::Int32, RedOp::Sum, dev.opts());
          comm.allgather(d_in, d_all, count, DataType::Int32, dev.opts());
          dev.read_back(d_all, out);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < count; ++i) {
              std::int32_t got = 0;
              std::memcpy(&got, out.data() + (std::size_t(q) * count + i) * 4, 4);
              const auto want = static_cast<std::int32_t>(5 * i * 3 + 10);
              if (got != want) {
                f.add(fmt::format("count {} rank {} block {} element {}: {} != {}", count, r, q, i,
                                  got, want));
                break;
              }
            }
        }
        dev.free_all();
      },
      kPeerReadOn);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// ---- Stream order

TEST_CASE("peer-read route: a call on a held stream returns, and runs when the stream does",
          "[device][peer_read]") {
  loom::test::run_ranks(
      2,
      [](Communicator& comm) {
        device::Device& dev = device::host_sim();
        device::Stream s = value_or_throw(dev.create_stream());
        const std::size_t n = 4099;
        auto* buf = static_cast<std::int32_t*>(value_or_throw(dev.alloc(n * 4)));
        std::vector<std::int32_t> in(n), out(n, -1);
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(i) + comm.rank();
        loom::test::StreamHold hold;  // the stream has not produced the input yet
        throw_if_error(dev.launch_host_fn(s, &loom::test::StreamHold::fn, &hold));
        throw_if_error(dev.copy_async(buf, in.data(), n * 4, s));
        CollOptions o;
        o.stream = s;
        Work w = comm.allreduce(buf, buf, n, DataType::Int32, RedOp::Sum, o);
        throw_if_error(dev.copy_async(out.data(), buf, n * 4, s));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHECK(std::atomic_ref<std::int32_t>(out[0]).load() == -1);  // nothing ran yet
        hold.release();
        w.wait();  // the host part: done once the call is on the device
        throw_if_error(dev.synchronize(s, Deadline::after(std::chrono::seconds(30))));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == 2 * static_cast<std::int32_t>(i) + 1);
        dev.free(buf);
        dev.destroy_stream(s);
      },
      kPeerReadOn);
}

// x = allreduce(x), twelve times without a synchronisation (more calls than the route keeps
// apart in its flags' steps): each call reads what the one before wrote. Then two streams, each
// its own chain, interleaved; and a dependency from one stream to the other through an event.
TEST_CASE("peer-read route: calls back to back, on several streams", "[device][peer_read]") {
  Findings f;
  loom::test::run_ranks(
      3,
      [&](Communicator& comm) {
        device::Device& dev = device::host_sim();
        const int r = comm.rank();
        const std::size_t n = 1031;
        device::Stream a = value_or_throw(dev.create_stream());
        device::Stream b = value_or_throw(dev.create_stream());
        auto* x = static_cast<std::int64_t*>(value_or_throw(dev.alloc(n * 8)));
        auto* y = static_cast<std::int64_t*>(value_or_throw(dev.alloc(n * 8)));
        auto* z = static_cast<std::int64_t*>(value_or_throw(dev.alloc(3 * n * 8)));
        std::vector<std::int64_t> hx(n), hy(n), hz(3 * n);
        for (std::size_t i = 0; i < n; ++i) {
          hx[i] = static_cast<std::int64_t>(i) + r;
          hy[i] = 2 * static_cast<std::int64_t>(i) + r;
        }
        throw_if_error(dev.copy_async(x, hx.data(), n * 8, a));
        throw_if_error(dev.copy_async(y, hy.data(), n * 8, b));
        CollOptions on_a, on_b;
        on_a.stream = a;
        on_b.stream = b;
        for (int k = 0; k < 12; ++k) {  // sums of 3: x_k = 3^k (i + 1) (mod 2^64) etc.
          comm.allreduce(x, x, n, DataType::Int64, RedOp::Sum, on_a);
          comm.allreduce(y, y, n, DataType::Int64, RedOp::Sum, on_b);
        }
        device::Event done_a = value_or_throw(dev.create_event());
        throw_if_error(dev.record(done_a, a));
        throw_if_error(dev.wait_event(b, done_a));  // b's allgather reads what a wrote
        comm.allgather(x, z, n, DataType::Int64, on_b);
        throw_if_error(dev.copy_async(hz.data(), z, 3 * n * 8, b));
        throw_if_error(dev.copy_async(hy.data(), y, n * 8, b));
        throw_if_error(dev.synchronize(b, Deadline::after(std::chrono::seconds(30))));
        std::int64_t p3 = 1;
        for (int k = 0; k < 11; ++k) p3 *= 3;
        for (std::size_t i = 0; i < n && f.wrong == 0; ++i) {
          const std::int64_t wx = p3 * (3 * static_cast<std::int64_t>(i) + 3);
          const std::int64_t wy = p3 * (6 * static_cast<std::int64_t>(i) + 3);
          for (int q = 0; q < 3; ++q)
            if (hz[std::size_t(q) * n + i] != wx)
              f.add(fmt::format("rank {}: x element {} from rank {}: {} != {}", r, i, q,
                                hz[std::size_t(q) * n + i], wx));
          if (hy[i] != wy) f.add(fmt::format("rank {}: y element {}: {} != {}", r, i, hy[i], wy));
        }
        throw_if_error(dev.synchronize(a, Deadline::after(std::chrono::seconds(30))));
        dev.destroy_event(done_a);
        for (void* p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(z)})
          dev.free(p);
        dev.destroy_stream(a);
        dev.destroy_stream(b);
      },
      kPeerReadOn);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// ---- Agreement

TEST_CASE("peer-read route: LOOM_CUDA_IPC_PEER_READ=on where it cannot be fails on every rank",
          "[device][peer_read]") {
  struct Case {
    const char* what;
    std::map<std::string, std::string> rank1;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"rank 1 stages", {{"LOOM_CUDA_IPC_ROUTE", "staged"}}, "host-staging"},
      {"rank 1 says off", {{"LOOM_CUDA_IPC_PEER_READ", "off"}}, "rank 1 sets"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto store = std::make_shared<bootstrap::InMemoryStore>();
    static std::uint64_t next_id = 0x7100;
    const std::uint64_t id = ++next_id;
    std::string errors[2];
    loom::test::on_rank_threads(2, [&](int r) {
      auto s = kPeerReadOn;
      s["LOOM_TIMEOUT"] = "20s";
      if (r == 1)
        for (const auto& [k, v] : c.rank1) s[k] = v;
      try {
        loom::test::make_comm(store, r, 2, id, s);
      } catch (const loom::Error& e) {
        errors[r] = e.what();
      }
    });
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << errors[r]);
      CHECK_THAT(errors[r], Catch::Matchers::Contains("LOOM_CUDA_IPC_PEER_READ=on on rank 0") &&
                                Catch::Matchers::Contains(c.named));
    }
  }
}

TEST_CASE("peer-read route: auto stays off where a pair stages, off keeps the FIFOs",
          "[device][peer_read]") {
  for (const char* mode : {"auto", "off"}) {
    INFO(mode);
    const std::uint64_t multi = device::host_sim_multi_launches();
    loom::test::run_ranks(
        2,
        [&](Communicator& comm) {
          Rank dev;
          std::vector<std::uint8_t> host(4 * 1000);
          loom::test::fill_input(DataType::Float32, RedOp::Sum, comm.rank(), host.data(), 1000);
          std::uint8_t* d = dev.device_copy_of(host);
          comm.allreduce(d, d, 1000, DataType::Float32, RedOp::Sum, dev.opts());
          dev.read_back(d, host);
          std::vector<std::uint8_t> want(4);
          for (std::size_t i = 0; i < 1000; ++i) {
            loom::test::store_expected(DataType::Float32, RedOp::Sum, 2, i, want.data());
            REQUIRE(std::memcmp(host.data() + 4 * i, want.data(), 4) == 0);
          }
          dev.free_all();
        },
        {{"LOOM_DEVICE", "host-sim"},
         {"LOOM_CUDA_IPC_PEER_READ", mode},
         {"LOOM_CUDA_IPC_ROUTE", std::string(mode) == "auto" ? "staged" : "auto"}});
    CHECK(device::host_sim_multi_launches() == multi);
  }
}

// ---- Pure parts

TEST_CASE("peer-read plan: blocks of 64-byte units cover the count once", "[peer_read]") {
  for (std::size_t elem : {1u, 2u, 4u, 8u})
    for (int n : {2, 3, 5, 16})
      for (std::size_t count : {0u, 1u, 15u, 16u, 17u, 1000u, 4099u}) {
        std::size_t next = 0;
        for (int k = 0; k < n; ++k) {
          const device::Block b = device::peer_read_block(count, elem, k, n);
          INFO("elem " << elem << " ranks " << n << " count " << count << " block " << k);
          REQUIRE(b.begin == next);
          REQUIRE(b.end >= b.begin);
          if (b.end < count) REQUIRE((b.end * elem) % 64 == 0);  // whole units but the last
          next = b.end;
        }
        REQUIRE(next == count);
      }
}

TEST_CASE("peer-read plan: each collective's launch reads and writes the right blocks",
          "[peer_read]") {
  alignas(64) static std::uint8_t mem[3][2][8192];
  device::RankBuffers b;
  for (int k = 0; k < 3; ++k) {
    b.send.push_back(mem[k][0]);
    b.recv.push_back(mem[k][1]);
  }
  coll::OpDesc op;
  op.dtype = DataType::Float32;
  op.count = 1000;  // 4000 bytes: blocks of 21 units (1344 bytes, 336 floats)
  op.kind = coll::CollKind::AllReduce;
  op.redop = RedOp::Avg;
  auto m = device::peer_read_launch(op, 1, 3, b);
  REQUIRE(m);
  CHECK(m->nsrc == 3);
  CHECK(m->ndst == 3);
  CHECK(m->count == 336);
  CHECK(m->divide_by == 3);
  CHECK(m->src[2] == mem[2][0] + 1344);
  CHECK(m->dst[0] == mem[0][1] + 1344);
  op.kind = coll::CollKind::ReduceScatter;  // count per rank
  op.redop = RedOp::Max;
  m = device::peer_read_launch(op, 2, 3, b);
  REQUIRE(m);
  CHECK((m->ndst == 1 && m->dst[0] == mem[2][1] && m->src[0] == mem[0][0] + 8000));
  CHECK(m->divide_by == 0);
  op.kind = coll::CollKind::Reduce;
  op.root = 0;
  m = device::peer_read_launch(op, 2, 3, b);  // the last block: 1000 - 672 floats
  REQUIRE(m);
  CHECK((m->count == 328 && m->dst[0] == mem[0][1] + 2688 && m->ndst == 1));
  op.kind = coll::CollKind::AllGather;
  m = device::peer_read_launch(op, 1, 3, b);
  REQUIRE(m);
  CHECK((m->dtype == DataType::Uint8 && m->count == 4000 && m->nsrc == 1 && m->ndst == 3));
  CHECK(m->dst[2] == mem[2][1] + 4000);
  b.send[1] = mem[1][1] + 4000;  // in place: its own chunk is already there
  CHECK(device::peer_read_launch(op, 1, 3, b)->ndst == 2);
  op.kind = coll::CollKind::Broadcast;
  op.root = 1;
  CHECK(device::peer_read_launch(op, 0, 3, b)->src[0] == mem[1][1] + 4000);
  b.recv[1] = mem[1][1] + 4000;  // the root in place: nothing to run
  CHECK_FALSE(device::peer_read_launch(op, 1, 3, b));
  op.kind = coll::CollKind::AllReduce;
  op.count = 3;  // one block: ranks 1 and 2 run nothing
  CHECK(device::peer_read_launch(op, 0, 3, b));
  CHECK_FALSE(device::peer_read_launch(op, 1, 3, b));
  op.kind = coll::CollKind::AllToAll;
  CHECK_FALSE(device::peer_read_serves(op));
  op.kind = coll::CollKind::AllReduce;
  op.redop = RedOp::PreMulSum;
  op.scalar = 0.5;
  CHECK_FALSE(device::peer_read_serves(op));
}

TEST_CASE("peer-read handle cache: reuse, a reallocated address, the limit and eviction",
          "[peer_read]") {
  std::vector<void*> opened, closed;
  std::uint8_t space[4][4096];
  device::ImportCache cache(
      [&](const device::IpcHandle& h) -> Result<void*> {
        void* p = space[h.bytes[0]];
        opened.push_back(p);
        return p;
      },
      [&](void* p) { closed.push_back(p); }, 2);
  auto ref = [](std::uint8_t which, std::uint64_t id, std::uint64_t base, std::uint64_t offset) {
    device::BufferRef r;
    r.handle.bytes[0] = which;
    r.alloc_id = id;
    r.base = base;
    r.alloc_bytes = 4096;
    r.offset = offset;
    r.bytes = 64;
    return r;
  };
  // Reuse: one mapping per allocation, whatever the offset.
  CHECK(value_or_throw(cache.map(1, ref(0, 10, 0x1000, 0), 1)) == space[0]);
  CHECK(value_or_throw(cache.map(1, ref(0, 10, 0x1000, 128), 1)) == space[0] + 128);
  CHECK(opened.size() == 1);
  // The peer freed that allocation and has another at the same base (a new id): opened anew;
  // the stale mapping closes once call 1 has finished, not before.
  CHECK(value_or_throw(cache.map(1, ref(1, 11, 0x1000, 0), 2)) == space[1]);
  CHECK(opened.size() == 2);
  CHECK(closed.empty());
  cache.retire(1);
  CHECK(closed == std::vector<void*>{space[0]});
  // Over the limit (2): the least recently used that no queued call uses closes.
  CHECK(value_or_throw(cache.map(2, ref(2, 10, 0x1000, 0), 3)) == space[2]);  // another peer
  CHECK(cache.open_mappings() == 2);
  CHECK(value_or_throw(cache.map(1, ref(3, 12, 0x9000, 0), 4)) == space[3]);
  CHECK(cache.open_mappings() == 3);  // all in use by calls 2..4
  cache.retire(3);
  CHECK(cache.open_mappings() == 2);
  CHECK(closed.back() == space[1]);  // peer 1's allocation 11, the least recently used
  // A reference outside its allocation is refused.
  auto bad = ref(0, 13, 0x5000, 4090);
  CHECK(cache.map(1, bad, 5).status().code() == ErrorCode::Internal);
}

TEST_CASE("peer-read export cache: one handle per allocation, refused memory named",
          "[peer_read][device]") {
  device::Device& dev = device::host_sim();
  device::ExportCache cache(dev, 8);
  auto* p = static_cast<std::uint8_t*>(value_or_throw(dev.alloc(4096)));
  const device::BufferRef a = value_or_throw(cache.share(p + 256, 1024));
  CHECK(a.base == reinterpret_cast<std::uintptr_t>(p));
  CHECK(a.offset == 256);
  CHECK(a.alloc_bytes == 4096);
  CHECK(a.alloc_id == dev.allocation_id(p));
  const device::BufferRef b = value_or_throw(cache.share(p, 4096));
  CHECK(std::memcmp(a.handle.bytes.data(), b.handle.bytes.data(), 64) == 0);
  CHECK(cache.misses() == 1);
  CHECK(cache.hits() == 1);
  CHECK(cache.share(p + 1024, 4096).status().code() == ErrorCode::InvalidArgument);  // past end
  device::host_sim_refuse_ipc(p);
  auto* q = static_cast<std::uint8_t*>(value_or_throw(dev.alloc(4096)));
  device::host_sim_refuse_ipc(q);
  auto refused = cache.share(q, 64);
  CHECK(refused.status().code() == ErrorCode::InvalidUsage);
  CHECK_THAT(refused.status().message(), Catch::Matchers::Contains("cannot be shared"));
  dev.free(p);
  dev.free(q);
}
