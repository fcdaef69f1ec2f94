// The full collective suite on device buffers, stream-ordered, through the host simulation of
// the device seam (LOOM_DEVICE=host-sim), over the cuda_ipc FIFOs, the staged path and ofi
// FI_HMEM (the matrix: device_matrix.hpp; the peer-read route's: test_peer_read.cpp).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <tuple>
#include <utility>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "device_matrix.hpp"
#include "reference.hpp"
#include "transports/ofi/ofi_fabric.hpp"

using namespace loom;
using loom::test::fill_input;
using loom::test::input_value;
using loom::test::kAllOps;
using loom::test::kAllTypes;
using loom::test::ops_for;
using loom::test::Rank;
using loom::test::store_expected;
using loom::test::store_value;

namespace {

// The cuda_ipc FIFO route (and the staged path); the peer-read route has its own tests
// (test_peer_read.cpp).
const std::map<std::string, std::string> kSim = {{"LOOM_DEVICE", "host-sim"},
                                                 {"LOOM_CUDA_IPC_PEER_READ", "off"}};

void run_device_matrix(int n, std::vector<int> devices = {},
                       std::map<std::string, std::string> settings = kSim,
                       std::vector<std::string> hosts = {}) {
  loom::test::run_device_matrix(n, std::move(devices), std::move(settings), std::move(hosts));
}

}  // namespace

TEST_CASE("device collectives (host-sim): full matrix with 1 rank", "[device]") {
  run_device_matrix(1);
}
// One device for every rank: each peer's FIFO opens on that device (the p2p route, as for two
// processes sharing a GPU).
TEST_CASE("device collectives (host-sim, cuda_ipc host staging): 2 ranks", "[device]") {
  run_device_matrix(2);
}
TEST_CASE("device collectives (host-sim, cuda_ipc host staging): 3 ranks", "[device]") {
  run_device_matrix(3);
}
// One NVLink island: every pair reads straight from the peer's device FIFO.
TEST_CASE("device collectives (host-sim, cuda_ipc p2p): 2 ranks", "[device]") {
  run_device_matrix(2, {0, 1});
}
TEST_CASE("device collectives (host-sim, cuda_ipc p2p): 3 ranks", "[device]") {
  run_device_matrix(3, {0, 1, 2});
}
// Both routes in one communicator: 0<->2 p2p, 1 on the other island.
TEST_CASE("device collectives (host-sim, cuda_ipc mixed routes): 3 ranks", "[device]") {
  run_device_matrix(3, {0, 4, 1});
}
// cuda_ipc excluded: the staged path (pinned host staging + the host transports).
TEST_CASE("device collectives (host-sim, staged through host transports): 3 ranks", "[device]") {
  auto settings = kSim;
  settings["LOOM_TRANSPORTS"] = "^cuda_ipc";
  run_device_matrix(3, {0, 1, 2}, settings);
}

// LOOM_STREAM_GATE=wait-value: the streams wait for a word loom writes instead of a host
// function, on the direct path (p2p) and the staged one.
TEST_CASE("device collectives (host-sim, wait-value stream gates): direct and staged, 2 ranks",
          "[device]") {
  auto settings = kSim;
  settings["LOOM_STREAM_GATE"] = "wait-value";
  const std::uint64_t waits = device::host_sim_value_waits();
  run_device_matrix(2, {0, 1}, settings);
  const std::uint64_t direct = device::host_sim_value_waits() - waits;
  settings["LOOM_TRANSPORTS"] = "^cuda_ipc";
  run_device_matrix(2, {0, 1}, settings);
  const std::uint64_t staged = device::host_sim_value_waits() - waits - direct;
  CHECK(direct > 100);  // every stream-ordered call of the matrix held its stream so
  CHECK(staged > 100);
}

TEST_CASE("device collectives: one host reduces with device kernels, the staged path on the host",
          "[device]") {
  for (bool direct : {true, false}) {
    auto settings = kSim;
    if (!direct) settings["LOOM_TRANSPORTS"] = "^cuda_ipc";
    const std::uint64_t before = device::host_sim_reduce_launches();
    loom::test::run_ranks(
        2,
        [&](Communicator& comm) {
          Rank dev;
          std::vector<std::uint8_t> host(4 * 1000);
          fill_input(DataType::Float32, RedOp::Sum, comm.rank(), host.data(), 1000);
          std::uint8_t* d = dev.device_copy_of(host);
          comm.allreduce(d, d, 1000, DataType::Float32, RedOp::Sum, dev.opts());
          dev.read_back(d, host);
          std::vector<std::uint8_t> want(4);
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < 1000; ++i) {
            store_expected(DataType::Float32, RedOp::Sum, 2, i, want.data());
            wrong += std::memcmp(host.data() + 4 * i, want.data(), 4) != 0;
          }
          if (wrong) throw std::runtime_error(fmt::format("{} wrong elements", wrong));
          dev.free_all();
        },
        settings);
    INFO((direct ? "cuda_ipc" : "staged"));
    CHECK((device::host_sim_reduce_launches() > before) == direct);
  }
}

// A group's sends and receives on device buffers run side by side (staged together on the
// stream): every rank sends 4 MiB to the next and receives from the previous, more than the
// shared-memory channels buffer, so one after another they would wait for each other until the
// deadline. A small host-buffer pair in the same group runs in the same operation.
TEST_CASE("device groups: a ring of large device sends and receives in one group completes",
          "[device][groups][p2p]") {
  auto settings = kSim;
  settings["LOOM_TRANSPORTS"] = "^cuda_ipc";  // staged: the direct path runs calls one by one
  settings["LOOM_TIMEOUT"] = "20s";
  for (int n : {2, 3}) {
    loom::test::Findings f;
    loom::test::run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
          const std::size_t count = std::size_t{1} << 20;  // int32: 4 MiB
          Rank dev;
          std::vector<std::uint8_t> out(count * 4), in(count * 4, 0xee);
          for (std::size_t i = 0; i < count; ++i) {
            const auto v = static_cast<std::int32_t>(r * 7 + int(i % 1000));
            std::memcpy(out.data() + 4 * i, &v, 4);
          }
          std::uint8_t* d_out = dev.device_copy_of(out);
          std::uint8_t* d_in = dev.device_copy_of(in);
          std::vector<std::int32_t> small_out(5, r), small_in(5, -1);
          {
            Group g(comm);
            comm.send(d_out, count, DataType::Int32, next, 1, dev.opts());
            comm.send(std::span<const std::int32_t>(small_out), next, 2);
            comm.recv(d_in, count, DataType::Int32, prev, 1, dev.opts());
            comm.recv(std::span<std::int32_t>(small_in), prev, 2);
            g.end();
          }
          dev.read_back(d_in, in);
          for (std::size_t i = 0; i < count; ++i) {
            std::int32_t got = 0;
            std::memcpy(&got, in.data() + 4 * i, 4);
            if (got != prev * 7 + int(i % 1000)) {
              f.add(fmt::format("{} ranks: rank {} element {}: {}", n, r, i, got));
              break;
            }
          }
          comm.barrier();  // the host receive completed with the group's operation
          if (small_in != std::vector<std::int32_t>(5, prev))
            f.add(fmt::format("{} ranks: rank {}: host buffer in the group", n, r));
          dev.free_all();
        },
        settings);
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

// PreMulSum with a scalar on device buffers: the direct path has no scaling step, so the call
// goes through host staging there too; each rank's own scalar applies.
TEST_CASE("device collectives: PreMulSum with each rank's scalar, direct and staged routes",
          "[device][redops]") {
  for (bool direct : {true, false}) {
    auto settings = kSim;
    if (!direct) settings["LOOM_TRANSPORTS"] = "^cuda_ipc";
    std::atomic<int> wrong{0};
    loom::test::run_ranks(
        3,
        [&](Communicator& comm) {
          Rank dev;
          const int r = comm.rank();
          std::vector<float> x(1000);
          for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i + std::size_t(r)) % 4);
          std::vector<std::uint8_t> host(4 * x.size());
          std::memcpy(host.data(), x.data(), host.size());
          std::uint8_t* d = dev.device_copy_of(host);
          std::uint8_t* out = dev.device_copy_of(std::vector<std::uint8_t>(host.size(), 0));
          CollOptions o = dev.opts();
          o.scalar = 0.25 * (r + 1);
          comm.allreduce(d, out, x.size(), DataType::Float32, RedOp::PreMulSum, o);
          dev.read_back(out, host);
          std::vector<float> got(x.size());
          std::memcpy(got.data(), host.data(), host.size());
          for (std::size_t i = 0; i < x.size(); ++i) {
            float want = 0;
            for (int q = 0; q < 3; ++q)
              want += 0.25f * float(q + 1) * float((i + std::size_t(q)) % 4);
            if (got[i] != want) ++wrong;
          }
          dev.free_all();
        },
        settings);
    INFO((direct ? "cuda_ipc" : "staged"));
    CHECK(wrong.load() == 0);
  }
}

TEST_CASE("a collective on a stream being captured into a CUDA graph is refused, naming it",
          "[device]") {
  loom::test::run_ranks(
      1,
      [&](Communicator& comm) {
        Rank dev;
        std::uint8_t* d = dev.device_copy_of(std::vector<std::uint8_t>(64, 1));
        CollOptions o = dev.opts();
        device::host_sim_set_capturing(o.stream, true);
        auto e = loom::test::catch_error(
            [&] { comm.allreduce(d, d, 16, DataType::Float32, RedOp::Sum, o); });
        device::host_sim_set_capturing(o.stream, false);
        CHECK(e.code() == ErrorCode::InvalidUsage);
        CHECK_THAT(std::string(e.what()),
                   Catch::Matchers::Contains("rank 0") && Catch::Matchers::Contains("allreduce") &&
                       Catch::Matchers::Contains("captured into a CUDA graph"));
        comm.allreduce(d, d, 16, DataType::Float32, RedOp::Sum, o);  // the communicator still works
        dev.sync();
      },
      kSim);
}

// ---- Across hosts: ofi straight from device memory (FI_HMEM), simulated ----

namespace {

// Two fake hosts; peers on the other host over ofi (libfabric's shm provider, which offers
// FI_HMEM) with host-sim device memory registered as FI_HMEM_SYSTEM; cuda_ipc inside a host.
std::map<std::string, std::string> hmem_settings() {
  auto s = kSim;
  s["LOOM_TRANSPORTS"] = "shm,ofi,cuda_ipc";
  s["LOOM_OFI_PROVIDER"] = "shm";
  s["LOOM_OFI_FALLBACK"] = "false";
  s["LOOM_OFI_HMEM"] = "simulate";
  return s;
}

bool shm_provider_has_hmem() {
  auto p = loom::transport::ofi::probe_provider({"shm", ""});
  return p.is_ok() && p->hmem;
}

/// shm_provider_has_hmem(), warning that the test is skipped when it is false.
bool hmem_or_skip() {
  if (shm_provider_has_hmem()) return true;
  WARN("libfabric's shm provider with FI_HMEM is not available: skipped");
  return false;
}

// One float allreduce (sum) on device buffers with per-rank settings; checks every element.
void device_allreduce(int n, std::size_t count, const std::vector<std::string>& hosts,
                      const std::function<std::map<std::string, std::string>(int)>& settings) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0x6800;
  const std::uint64_t comm_id = ++next_id;
  std::string error;
  loom::test::EndTogether::Shared end;
  try {
    loom::test::on_rank_threads(n, [&](int r) {
      auto s = settings(r);
      s["LOOM_HOST_ID"] = hosts[static_cast<std::size_t>(r)];
      s["LOOM_TIMEOUT"] = "60s";
      Communicator comm = loom::test::make_comm(store, r, n, comm_id, s);
      const loom::test::EndTogether together(end, n);
      Rank dev;
      std::vector<std::uint8_t> host(4 * count);
      fill_input(DataType::Float32, RedOp::Sum, r, host.data(), count);
      std::uint8_t* d = dev.device_copy_of(host);
      comm.allreduce(d, d, count, DataType::Float32, RedOp::Sum, dev.opts());
      dev.read_back(d, host);
      std::vector<std::uint8_t> want(4);
      for (std::size_t i = 0; i < count; ++i) {
        store_expected(DataType::Float32, RedOp::Sum, n, i, want.data());
        if (std::memcmp(host.data() + 4 * i, want.data(), 4) != 0)
          throw std::runtime_error(fmt::format("element {} is wrong", i));
      }
      dev.free_all();
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  INFO("error: " << error);
  REQUIRE(error.empty());
}

}  // namespace

TEST_CASE("device collectives across hosts (host-sim, ofi FI_HMEM simulated): 2 x 2 ranks",
          "[device][ofi]") {
  if (!hmem_or_skip()) return;
  const std::uint64_t flushes = device::host_sim_remote_write_flushes();
  const std::uint64_t kernels = device::host_sim_reduce_launches();
  // Devices 0 and 1 on each host: cuda_ipc p2p inside a host, ofi across.
  run_device_matrix(4, {0, 1, 0, 1}, hmem_settings(), {"hostA", "hostA", "hostB", "hostB"});
  CHECK(device::host_sim_remote_write_flushes() > flushes);  // NIC receives into device memory
  CHECK(device::host_sim_reduce_launches() > kernels);       // reductions as device kernels
}

TEST_CASE("device collectives across hosts (host-sim, ofi FI_HMEM simulated): 1 + 2 ranks",
          "[device][ofi]") {
  if (!hmem_or_skip()) return;
  const std::uint64_t flushes = device::host_sim_remote_write_flushes();
  // One rank alone on its host, and a host whose two ranks share a device (host staging).
  run_device_matrix(3, {0, 0, 0}, hmem_settings(), {"hostA", "hostB", "hostB"});
  CHECK(device::host_sim_remote_write_flushes() > flushes);
}

TEST_CASE("device buffers across hosts: one rank that cannot send device memory stages everyone",
          "[device][ofi]") {
  if (!hmem_or_skip()) return;
  const std::vector<std::string> hosts = {"hostA", "hostA", "hostB"};
  struct Case {
    const char* what;
    std::function<std::map<std::string, std::string>(int)> settings;
    bool direct;
  };
  const std::vector<Case> cases = {
      {"all simulate", [](int) { return hmem_settings(); }, true},
      {"rank 2 says off",
       [](int r) {
         auto s = hmem_settings();
         if (r == 2) s["LOOM_OFI_HMEM"] = "off";
         return s;
       },
       false},
      {"auto on host-sim (no CUDA, nothing to register)",
       [](int) {
         auto s = hmem_settings();
         s["LOOM_OFI_HMEM"] = "auto";
         return s;
       },
       false},
      {"across hosts over tcp",
       [](int) {
         auto s = kSim;
         s["LOOM_OFI_HMEM"] = "simulate";
         return s;
       },
       false},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::uint64_t flushes = device::host_sim_remote_write_flushes();
    device_allreduce(3, 1031, hosts, c.settings);
    CHECK((device::host_sim_remote_write_flushes() > flushes) == c.direct);
  }
}

TEST_CASE("LOOM_OFI_HMEM rejects unknown values", "[device][ofi]") {
  auto e = loom::test::catch_error([&] {
    auto store = std::make_shared<bootstrap::InMemoryStore>();
    loom::test::make_comm(store, 0, 1, 0x6900, {{"LOOM_OFI_HMEM", "maybe"}});
  });
  CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("LOOM_OFI_HMEM='maybe'"));
}

TEST_CASE("ranks with different device runtimes fail at init naming the setting", "[device]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        loom::test::make_comm(
            store, r, 2, 0x6a00,
            {{"LOOM_DEVICE", r == 0 ? "host-sim" : "none"}, {"LOOM_TIMEOUT", "3s"}});
      } catch (const loom::Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  CHECK_THAT(errors[1], Catch::Matchers::Contains("rank 1") &&
                            Catch::Matchers::Contains("device runtime (LOOM_DEVICE)=none here") &&
                            Catch::Matchers::Contains("host-sim on rank 0"));
  INFO("rank 0: " << errors[0]);
  CHECK_FALSE(errors[0].empty());  // rank 0 times out waiting for rank 1's device setup
}
