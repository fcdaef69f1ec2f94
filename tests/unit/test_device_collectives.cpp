// The full collective suite on device buffers, stream-ordered, through the host simulation of
// the device seam (LOOM_DEVICE=host-sim): every collective x dtype x op, in place and out of
// place, odd rank counts, counts 0 / 1 / primes / non-multiples of nranks. Inputs reach the
// device buffers by copies enqueued on the rank's stream, results leave them the same way right
// after the call returns, and only then is the stream synchronised: so the test passes only if
// the collective is ordered on the stream both ways.
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "reference.hpp"

using namespace loom;
using loom::test::fill_input;
using loom::test::input_value;
using loom::test::store_expected;
using loom::test::store_value;

namespace {

constexpr DataType kAllTypes[] = {DataType::Int8,    DataType::Uint8,      DataType::Int32,
                                  DataType::Uint32,  DataType::Int64,      DataType::Uint64,
                                  DataType::Float16, DataType::BFloat16,   DataType::Float32,
                                  DataType::Float64, DataType::Float8E4M3, DataType::Float8E5M2};
constexpr RedOp kAllOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
const std::map<std::string, std::string> kSim = {{"LOOM_DEVICE", "host-sim"}};

/// One rank's stream and device buffers on the simulated device.
class Rank {
 public:
  Rank() : dev_(device::host_sim()), stream_(value_or_throw(dev_.create_stream())) {}
  ~Rank() {
    for (void* p : bufs_) dev_.free(p);
    dev_.destroy_stream(stream_);
  }
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  CollOptions opts() const {
    CollOptions o;
    o.stream = stream_;
    return o;
  }
  /// A device buffer of `bytes` (+1 guard byte) whose contents are `init`, copied on the stream.
  std::uint8_t* device_copy_of(const std::vector<std::uint8_t>& init) {
    auto* p = static_cast<std::uint8_t*>(value_or_throw(dev_.alloc(init.size())));
    bufs_.push_back(p);
    throw_if_error(dev_.copy_async(p, init.data(), init.size(), stream_));
    return p;
  }
  /// Enqueues a copy of device memory into `host` and waits for the stream.
  void read_back(const void* src, std::vector<std::uint8_t>& host) {
    throw_if_error(dev_.copy_async(host.data(), src, host.size(), stream_));
    sync();
  }
  void sync() {
    throw_if_error(dev_.synchronize(stream_, Deadline::after(std::chrono::seconds(60))));
  }
  void free_all() {
    sync();
    for (void* p : bufs_) dev_.free(p);
    bufs_.clear();
  }

 private:
  device::Device& dev_;
  device::Stream stream_;
  std::vector<void*> bufs_;
};

struct Checker {
  std::size_t wrong = 0;
  std::string first;
  void element(const void* got, const void* want, std::size_t es, const std::string& where) {
    if (std::memcmp(got, want, es) == 0) return;
    if (wrong++ == 0) first = where;
  }
};

std::string where(const char* coll, DataType t, RedOp op, std::size_t count, bool ip, int rank,
                  std::size_t i) {
  return fmt::format("{} {} {} count {} {} rank {} element {}", coll, to_string(t), to_string(op),
                     count, ip ? "in-place" : "out-of-place", rank, i);
}

void check_reductions(Communicator& comm, Rank& dev, Checker& chk) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<std::uint8_t> send, out_host, want(8);
  for (DataType t : kAllTypes)
    for (RedOp op : kAllOps)
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, un * 5 + 1, std::size_t{1031}})
        for (bool ip : {false, true}) {
          const std::size_t es = dtype_size(t);
          const int root = static_cast<int>(count % un);
          // allreduce
          send.assign(count * es + 1, 0);
          fill_input(t, op, r, send.data(), count);
          std::uint8_t* d_send = dev.device_copy_of(send);
          std::uint8_t* d_out =
              ip ? d_send : dev.device_copy_of(std::vector<std::uint8_t>(send.size(), 0xee));
          comm.allreduce(d_send, d_out, count, t, op, dev.opts());
          out_host.assign(count * es, 0);
          dev.read_back(d_out, out_host);
          for (std::size_t i = 0; i < count; ++i) {
            store_expected(t, op, n, i, want.data());
            chk.element(out_host.data() + i * es, want.data(), es,
                        where("allreduce", t, op, count, ip, r, i));
          }
          // reduce
          d_send = dev.device_copy_of(send);
          d_out = ip ? d_send : dev.device_copy_of(std::vector<std::uint8_t>(send.size(), 0xee));
          comm.reduce(d_send, d_out, count, t, op, root, dev.opts());
          dev.read_back(d_out, out_host);
          if (r == root)
            for (std::size_t i = 0; i < count; ++i) {
              store_expected(t, op, n, i, want.data());
              chk.element(out_host.data() + i * es, want.data(), es,
                          where("reduce", t, op, count, ip, r, i));
            }
          // reduce_scatter
          std::vector<std::uint8_t> rs(count * es * un + 1, 0);
          fill_input(t, op, r, rs.data(), count * un);
          d_send = dev.device_copy_of(rs);
          d_out = ip ? d_send + static_cast<std::size_t>(r) * count * es
                     : dev.device_copy_of(std::vector<std::uint8_t>(count * es + 1, 0xee));
          comm.reduce_scatter(d_send, d_out, count, t, op, dev.opts());
          dev.read_back(d_out, out_host);
          for (std::size_t i = 0; i < count; ++i) {
            store_expected(t, op, n, static_cast<std::size_t>(r) * count + i, want.data());
            chk.element(out_host.data() + i * es, want.data(), es,
                        where("reduce_scatter", t, op, count, ip, r, i));
          }
          dev.free_all();
        }
}

void check_data_movement(Communicator& comm, Rank& dev, Checker& chk) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
  std::vector<std::uint8_t> host, want(8);
  for (DataType t : kAllTypes)
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{13}, un * 5 + 1, std::size_t{1031}})
      for (bool ip : {false, true}) {
        const std::size_t es = dtype_size(t);
        const int root = static_cast<int>((count + 1) % un);
        // allgather
        std::vector<std::uint8_t> recv(count * es * un + 1, 0xee), send(count * es + 1, 0);
        fill_input(t, RedOp::Sum, r, ip ? recv.data() + ur * count * es : send.data(), count);
        std::uint8_t* d_recv = dev.device_copy_of(recv);
        std::uint8_t* d_in = ip ? d_recv + ur * count * es : dev.device_copy_of(send);
        comm.allgather(d_in, d_recv, count, t, dev.opts());
        host.assign(count * es * un, 0);
        dev.read_back(d_recv, host);
        for (std::size_t q = 0; q < un; ++q)
          for (std::size_t i = 0; i < count; ++i) {
            store_value(t, want.data(), input_value(t, RedOp::Sum, static_cast<int>(q), i));
            chk.element(host.data() + (q * count + i) * es, want.data(), es,
                        where("allgather", t, RedOp::Sum, count, ip, r, q * count + i));
          }
        // broadcast
        send.assign(count * es + 1, 0);
        if (r == root) fill_input(t, RedOp::Sum, root, send.data(), count);
        std::uint8_t* d_send = dev.device_copy_of(send);
        std::uint8_t* d_out =
            ip ? d_send : dev.device_copy_of(std::vector<std::uint8_t>(send.size(), 0xee));
        comm.broadcast(d_send, d_out, count, t, root, dev.opts());
        host.assign(count * es, 0);
        dev.read_back(d_out, host);
        for (std::size_t i = 0; i < count; ++i) {
          store_value(t, want.data(), input_value(t, RedOp::Sum, root, i));
          chk.element(host.data() + i * es, want.data(), es,
                      where("broadcast", t, RedOp::Sum, count, ip, r, i));
        }
        dev.free_all();
      }
  comm.barrier(dev.opts());
  dev.sync();
}

/// The matrix on n ranks (threads); rank r runs on simulated device devices[r] (host-sim: peer
/// access within {0..3} and {4..7}, none on one device), so the cuda_ipc routes are chosen
/// from real probing: p2p, host staging, or both in one communicator.
void run_device_matrix(int n, std::vector<int> devices = {},
                       std::map<std::string, std::string> settings = kSim) {
  if (devices.empty()) devices.assign(static_cast<std::size_t>(n), 0);
  settings["LOOM_TIMEOUT"] = "60s";
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0x6000;
  const std::uint64_t comm_id = ++next_id;
  std::mutex mu;
  std::size_t wrong = 0;
  std::string first, error;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        throw_if_error(device::host_sim().set_device(devices[static_cast<std::size_t>(r)]));
        Communicator comm = loom::test::make_comm(store, r, n, comm_id, settings);
        Rank dev;
        Checker chk;
        check_reductions(comm, dev, chk);
        check_data_movement(comm, dev, chk);
        std::lock_guard lock(mu);
        wrong += chk.wrong;
        if (first.empty()) first = chk.first;
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (error.empty()) error = fmt::format("rank {}: {}", r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  INFO("error: " << error);
  REQUIRE(error.empty());
  INFO("first wrong: " << first);
  REQUIRE(wrong == 0);
}

}  // namespace

TEST_CASE("device collectives (host-sim): full matrix with 1 rank", "[device]") {
  run_device_matrix(1);
}
// One device for every rank: no peer access, cuda_ipc stages through pinned shared memory.
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
