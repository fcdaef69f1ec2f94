// The device collective matrix on host-sim, shared by the tests of each route
// (test_device_collectives.cpp: cuda_ipc FIFOs, the staged path, ofi FI_HMEM; test_peer_read.cpp:
// the peer-read route): every collective x dtype x op, in place and out of place, counts 0 / 1 /
// primes / non-multiples of nranks. Inputs reach the device buffers by copies enqueued on the
// rank's stream, results leave them the same way right after the call returns, and only then is
// the stream synchronised: so a check passes only if the collective is ordered on the stream
// both ways.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "comm_harness.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "reference.hpp"

namespace loom::test {

/// A host function that holds a stream until released (bounded: 60 s).
struct StreamHold {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  static void fn(void* arg) {
    auto* h = static_cast<StreamHold*>(arg);
    std::unique_lock lk(h->mu);
    h->cv.wait_for(lk, std::chrono::seconds(60), [&] { return h->released; });
  }
  void release() {
    {
      std::lock_guard lk(mu);
      released = true;
    }
    cv.notify_all();
  }
};

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
  /// The copy reads a staged duplicate of `init`, which lives as long as this rank, so that a
  /// temporary passed here may go before the stream has copied it.
  std::uint8_t* device_copy_of(const std::vector<std::uint8_t>& init) {
    auto* p = static_cast<std::uint8_t*>(value_or_throw(dev_.alloc(init.size())));
    bufs_.push_back(p);
    const std::vector<std::uint8_t>& src = staged_.emplace_back(init);
    throw_if_error(dev_.copy_async(p, src.data(), src.size(), stream_));
    return p;
  }
  /// The send buffer (a device copy of `send`) and the output: the send buffer itself when
  /// `in_place`, else a separate buffer of the same size filled with 0xee.
  std::pair<std::uint8_t*, std::uint8_t*> send_and_out(const std::vector<std::uint8_t>& send,
                                                       bool in_place) {
    std::uint8_t* d_send = device_copy_of(send);
    return {d_send,
            in_place ? d_send : device_copy_of(std::vector<std::uint8_t>(send.size(), 0xee))};
  }
  /// Enqueues a copy of device memory into `host` and waits for the stream.
  void read_back(const void* src, std::vector<std::uint8_t>& host) {
    throw_if_error(dev_.copy_async(host.data(), src, host.size(), stream_));
    sync();
  }
  void sync() {
    throw_if_error(dev_.synchronize(stream_, Deadline::after(std::chrono::seconds(60))));
  }
  // Frees wait for the rank's destruction: a free (cudaFree) waits for the whole device, also
  // for the streams of the other ranks (threads) still held by their collectives.
  void free_all() { sync(); }

 private:
  device::Device& dev_;
  device::Stream stream_;
  std::vector<void*> bufs_;
  std::deque<std::vector<std::uint8_t>> staged_;  // sources of copies still on the stream
};

struct DeviceChecker {
  std::size_t wrong = 0;
  std::string first;
  void element(const void* got, const void* want, std::size_t es, const std::string& where) {
    if (std::memcmp(got, want, es) == 0) return;
    if (wrong++ == 0) first = where;
  }
};

inline std::string device_where(const char* coll, DataType t, RedOp op, std::size_t count, bool ip,
                                int rank, std::size_t i) {
  return fmt::format("{} {} {} count {} {} rank {} element {}", coll, to_string(t), to_string(op),
                     count, ip ? "in-place" : "out-of-place", rank, i);
}

inline void check_reductions(Communicator& comm, Rank& dev, DeviceChecker& chk) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<std::uint8_t> send, out_host, want(8);
  for (DataType t : kAllTypes)
    for (RedOp op : ops_for(t))
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, un * 5 + 1, std::size_t{1031}})
        for (bool ip : {false, true}) {
          const std::size_t es = dtype_size(t);
          const int root = static_cast<int>(count % un);
          // allreduce
          send.assign(count * es + 1, 0);
          fill_input(t, op, r, send.data(), count);
          auto [d_send, d_out] = dev.send_and_out(send, ip);
          comm.allreduce(d_send, d_out, count, t, op, dev.opts());
          out_host.assign(count * es, 0);
          dev.read_back(d_out, out_host);
          for (std::size_t i = 0; i < count; ++i) {
            store_expected(t, op, n, i, want.data());
            chk.element(out_host.data() + i * es, want.data(), es,
                        device_where("allreduce", t, op, count, ip, r, i));
          }
          // reduce
          std::tie(d_send, d_out) = dev.send_and_out(send, ip);
          comm.reduce(d_send, d_out, count, t, op, root, dev.opts());
          dev.read_back(d_out, out_host);
          if (r == root)
            for (std::size_t i = 0; i < count; ++i) {
              store_expected(t, op, n, i, want.data());
              chk.element(out_host.data() + i * es, want.data(), es,
                          device_where("reduce", t, op, count, ip, r, i));
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
                        device_where("reduce_scatter", t, op, count, ip, r, i));
          }
          dev.free_all();
        }
}

inline void check_data_movement(Communicator& comm, Rank& dev, DeviceChecker& chk) {
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
                        device_where("allgather", t, RedOp::Sum, count, ip, r, q * count + i));
          }
        // broadcast
        send.assign(count * es + 1, 0);
        if (r == root) fill_input(t, RedOp::Sum, root, send.data(), count);
        auto [d_send, d_out] = dev.send_and_out(send, ip);
        comm.broadcast(d_send, d_out, count, t, root, dev.opts());
        host.assign(count * es, 0);
        dev.read_back(d_out, host);
        for (std::size_t i = 0; i < count; ++i) {
          store_value(t, want.data(), input_value(t, RedOp::Sum, root, i));
          chk.element(host.data() + i * es, want.data(), es,
                      device_where("broadcast", t, RedOp::Sum, count, ip, r, i));
        }
        dev.free_all();
      }
  comm.barrier(dev.opts());
  dev.sync();
}

// alltoall, alltoallv (uneven, packed), gather and scatter on device buffers.
inline void check_exchanges(Communicator& comm, Rank& dev, DeviceChecker& chk) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
  std::vector<std::uint8_t> host, want(8);
  // Element i of the block rank q sends to rank p holds input_value(q, p * 1000 + i).
  auto value = [](int q, int p, std::size_t i) {
    return static_cast<std::size_t>(p) * 1000 + i + static_cast<std::size_t>(q) * 7;
  };
  for (DataType t : kAllTypes)
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1031}})
      for (bool ip : {false, true}) {
        const std::size_t es = dtype_size(t), block = count * es;
        const int root = static_cast<int>((count + 1) % un);
        auto fill = [&](std::uint8_t* at, int q, int p, std::size_t c) {
          for (std::size_t i = 0; i < c; ++i)
            store_value(t, at + i * es, input_value(t, RedOp::Sum, q, value(q, p, i) % 97));
        };
        auto expect = [&](const std::uint8_t* at, int q, int p, std::size_t c, const char* what) {
          for (std::size_t i = 0; i < c; ++i) {
            store_value(t, want.data(), input_value(t, RedOp::Sum, q, value(q, p, i) % 97));
            chk.element(at + i * es, want.data(), es,
                        device_where(what, t, RedOp::Sum, c, ip, r, i));
          }
        };
        // alltoall
        std::vector<std::uint8_t> send(block * un + 1, 0);
        for (int p = 0; p < n; ++p) fill(send.data() + std::size_t(p) * block, r, p, count);
        auto [d_send, d_out] = dev.send_and_out(send, ip);
        comm.alltoall(d_send, d_out, count, t, dev.opts());
        host.assign(block * un, 0);
        dev.read_back(d_out, host);
        for (int q = 0; q < n; ++q)
          expect(host.data() + std::size_t(q) * block, q, r, count, "alltoall");
        // alltoallv: rank q sends (q + p) % 3 * count elements to rank p, packed.
        std::vector<std::size_t> sc(un), rc(un);
        for (int p = 0; p < n; ++p) {
          sc[std::size_t(p)] = std::size_t((r + p) % 3) * count;
          rc[std::size_t(p)] = std::size_t((p + r) % 3) * count;
        }
        std::vector<std::uint8_t> vs(3 * count * es * un + 1, 0);
        std::size_t at = 0;
        for (int p = 0; p < n; ++p) {
          fill(vs.data() + at * es, r, p, sc[std::size_t(p)]);
          at += sc[std::size_t(p)];
        }
        d_send = dev.device_copy_of(vs);
        d_out = ip ? d_send : dev.device_copy_of(std::vector<std::uint8_t>(vs.size(), 0xee));
        comm.alltoallv(d_send, sc, d_out, rc, t, dev.opts());
        host.assign(vs.size(), 0);
        dev.read_back(d_out, host);
        at = 0;
        for (int q = 0; q < n; ++q) {
          expect(host.data() + at * es, q, r, rc[std::size_t(q)], "alltoallv");
          at += rc[std::size_t(q)];
        }
        // gather to root, then scatter from it
        std::vector<std::uint8_t> many(block * un + 1, 0xee), one(block + 1, 0);
        fill(ip && r == root ? many.data() + ur * block : one.data(), r, root, count);
        std::uint8_t* d_many = dev.device_copy_of(many);
        std::uint8_t* d_one = ip && r == root ? d_many + ur * block : dev.device_copy_of(one);
        comm.gather(d_one, r == root ? d_many : nullptr, count, t, root, dev.opts());
        host.assign(block * un, 0);
        dev.read_back(d_many, host);
        if (r == root)
          for (int q = 0; q < n; ++q)
            expect(host.data() + std::size_t(q) * block, q, root, count, "gather");
        if (r == root)
          for (int p = 0; p < n; ++p) fill(many.data() + std::size_t(p) * block, root, p, count);
        d_many = dev.device_copy_of(many);
        d_one = ip && r == root ? d_many + ur * block
                                : dev.device_copy_of(std::vector<std::uint8_t>(block + 1, 0xee));
        comm.scatter(r == root ? d_many : nullptr, d_one, count, t, root, dev.opts());
        host.assign(block, 0);
        dev.read_back(d_one, host);
        expect(host.data(), root, r, count, "scatter");
        // sendrecv around the ring, then a plain send / recv pair (rank 0 -> the last rank)
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        if (n > 1) {
          one.assign(block + 1, 0);
          fill(one.data(), r, next, count);
          d_one = dev.device_copy_of(one);
          std::uint8_t* d_in = dev.device_copy_of(std::vector<std::uint8_t>(block + 1, 0xee));
          comm.sendrecv(d_one, count, next, d_in, count, prev, t, 0, dev.opts());
          dev.read_back(d_in, host);
          expect(host.data(), prev, r, count, "sendrecv");
          if (r == 0) comm.send(d_one, count, t, n - 1, 1, dev.opts());
          if (r == n - 1) {
            comm.recv(d_in, count, t, 0, 1, dev.opts());
            dev.read_back(d_in, host);
            expect(host.data(), 0, 1, count, "send/recv");
          }
        }
        dev.free_all();
      }
  comm.barrier(dev.opts());
  dev.sync();
}

/// The matrix on n ranks (threads); rank r runs on simulated device devices[r] (host-sim: peer
/// access within {0..3} and {4..7}, none on one device), so the cuda_ipc routes are chosen
/// from real probing: p2p, host staging, or both in one communicator. `hosts[r]`, when given,
/// is rank r's LOOM_HOST_ID (ranks on several fake hosts).
inline void run_device_matrix(int n, std::vector<int> devices,
                              std::map<std::string, std::string> settings,
                              std::vector<std::string> hosts = {}) {
  if (devices.empty()) devices.assign(static_cast<std::size_t>(n), 0);
  settings["LOOM_TIMEOUT"] = "60s";
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  const std::uint64_t hazards = device::host_sim_sync_hazards();
  static std::uint64_t next_id = 0x6000;
  const std::uint64_t comm_id = ++next_id;
  std::mutex mu;
  std::size_t wrong = 0;
  std::string first;
  std::string error;
  loom::test::EndTogether::Shared end;
  try {
    loom::test::on_rank_threads(n, [&](int r) {
      throw_if_error(device::host_sim().set_device(devices[static_cast<std::size_t>(r)]));
      auto mine = settings;
      if (!hosts.empty()) mine["LOOM_HOST_ID"] = hosts[static_cast<std::size_t>(r)];
      Communicator comm = loom::test::make_comm(store, r, n, comm_id, mine);
      Rank dev;  // destroyed (its buffers freed) once every rank has ended
      const loom::test::EndTogether together(end, n);
      DeviceChecker chk;
      check_reductions(comm, dev, chk);
      check_data_movement(comm, dev, chk);
      check_exchanges(comm, dev, chk);
      std::lock_guard lock(mu);
      wrong += chk.wrong;
      if (first.empty()) first = chk.first;
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  INFO("error: " << error);
  REQUIRE(error.empty());
  INFO("first wrong: " << first);
  REQUIRE(wrong == 0);
  // No free inside loom while a collective held a stream (a deadlock on CUDA, seen on an H200).
  CHECK(device::host_sim_sync_hazards() == hazards);
}

}  // namespace loom::test
