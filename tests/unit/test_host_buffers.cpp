// loom::host_alloc buffers (include/loom/memory.hpp), threads as ranks over shared memory: large
// messages sent from them are read by the receiver through a mapping of the sender's memfd
// (transports/shm/peer_buffers.hpp), with exact results for sendrecv, alltoall and allreduce
// (whose ring receives reduce straight out of the mapping, where its sends are single-copy: a
// CPU per rank); a buffer freed and allocated again
// (the same descriptor number, another buffer) is read afresh, not through a stale mapping;
// LOOM_SHM_SINGLE_COPY=off and ordinary buffers never take that path; misuse is refused.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm_harness.hpp"
#include "loom/memory.hpp"
#include "transports/shm/peer_buffers.hpp"
#include "transports/shm/single_copy.hpp"

using namespace loom;
using loom::test::Findings;
using transport::shm::mapped_bytes_received;

namespace {

const std::map<std::string, std::string> kShm = {{"LOOM_TRANSPORTS", "shm"}};

// Exact in fp32 and int32: small integers unique per rank and index.
std::int32_t value(int rank, std::size_t i) {
  return static_cast<std::int32_t>(rank * 100000 + static_cast<int>(i % 50000));
}

// Runs `body` on n ranks (threads), checks what it found wrong, and returns the bytes the ranks
// read through mappings of each other's buffers meanwhile.
std::uint64_t run_counted(int n, const std::function<void(Communicator&, Findings&)>& body,
                          std::map<std::string, std::string> settings) {
  Findings f;
  const std::uint64_t before = mapped_bytes_received();
  loom::test::run_ranks(
      n, [&](Communicator& comm) { body(comm, f); }, std::move(settings));
  INFO(f.first);
  CHECK(f.wrong == 0);
  return mapped_bytes_received() - before;
}

}  // namespace

TEST_CASE("host buffers: sendrecv and alltoall from loom::host_alloc are read through a mapping",
          "[host_buffers][p2p][exchange]") {
  for (int n : {2, 3}) {
    const std::uint64_t mapped = run_counted(
        n,
        [&](Communicator& comm, Findings& f) {
          const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
          const std::size_t count = 100000;  // 400 KB: above the single-copy threshold
          HostBuffer<std::int32_t> out(count * static_cast<std::size_t>(n));
          std::vector<std::int32_t> in(count * static_cast<std::size_t>(n), -1);
          for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = value(r, i);
          comm.sendrecv(out.data(), count, next, in.data(), count, prev, DataType::Int32, 7).wait();
          for (std::size_t i = 0; i < count; ++i)
            if (in[i] != value(prev, i)) {
              f.add(fmt::format("{} ranks: sendrecv rank {} element {}: {}", n, r, i, in[i]));
              break;
            }
          comm.alltoall(out.data(), in.data(), count, DataType::Int32).wait();
          for (int p = 0; p < n; ++p)
            for (std::size_t i = 0; i < count; ++i) {
              const std::size_t at = static_cast<std::size_t>(p) * count + i;
              if (in[at] != value(p, static_cast<std::size_t>(r) * count + i)) {
                f.add(fmt::format("{} ranks: alltoall rank {} block {} element {}", n, r, p, i));
                break;
              }
            }
        },
        kShm);
    CHECK(mapped > 0);
  }
}

TEST_CASE("host buffers: allreduce reduces straight out of the peers' mapped buffers",
          "[host_buffers][collectives]") {
  const std::uint64_t mapped = run_counted(
      2,
      [&](Communicator& comm, Findings& f) {
        const std::size_t count = (std::size_t{3} << 20) / 4 + 5;  // 3 MiB and an odd count
        HostBuffer<float> send(count), recv(count);
        for (std::size_t i = 0; i < count; ++i)
          send.data()[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 1000));
        comm.allreduce(send.data(), recv.data(), count, DataType::Float32, RedOp::Sum).wait();
        for (std::size_t i = 0; i < count; ++i)
          if (recv.data()[i] != static_cast<float>(3 * static_cast<int>(i % 1000))) {
            f.add(fmt::format("rank {} element {}: {}", comm.rank(), i, recv.data()[i]));
            break;
          }
      },
      {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_ALGO", "ring"}});
  CHECK(mapped > 0);
}

// The receiver caches its mappings by the sender's descriptor number; a freed buffer's number
// comes back with the next allocation, which must be mapped afresh (the generation differs).
TEST_CASE("host buffers: a buffer allocated again in a freed one's place is read afresh",
          "[host_buffers][p2p]") {
  Findings f;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        const std::size_t count = 1 << 17;  // 512 KiB
        std::vector<std::int32_t> in(count);
        for (int round = 0; round < 3; ++round) {
          if (comm.rank() == 0) {
            HostBuffer<std::int32_t> out(count);
            for (std::size_t i = 0; i < count; ++i) out.data()[i] = value(round, i);
            comm.send(out.data(), count, DataType::Int32, 1, 0).wait();
          } else {
            comm.recv(in.data(), count, DataType::Int32, 0, 0).wait();
            for (std::size_t i = 0; i < count; ++i)
              if (in[i] != value(round, i)) {
                f.add(fmt::format("round {} element {}: {}", round, i, in[i]));
                break;
              }
          }
          comm.barrier();  // the buffer is freed before the next round's allocation
        }
      },
      kShm);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("host buffers: off with LOOM_SHM_SINGLE_COPY=off and for ordinary buffers",
          "[host_buffers]") {
  const std::size_t count = 1 << 18;
  auto exchange = [&](bool shared, std::map<std::string, std::string> settings) {
    return run_counted(
        2,
        [&](Communicator& comm, Findings& f) {
          const int r = comm.rank(), peer = 1 - r;
          std::vector<std::int32_t> plain(count), in(count, -1);
          HostBuffer<std::int32_t> host(count);
          std::int32_t* out = shared ? host.data() : plain.data();
          for (std::size_t i = 0; i < count; ++i) out[i] = value(r, i);
          comm.sendrecv(out, count, peer, in.data(), count, peer, DataType::Int32, 0).wait();
          for (std::size_t i = 0; i < count; ++i)
            if (in[i] != value(peer, i)) {
              f.add(fmt::format("rank {} element {}: {}", r, i, in[i]));
              break;
            }
        },
        std::move(settings));
  };
  CHECK(exchange(true, {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_SHM_SINGLE_COPY", "off"}}) == 0);
  CHECK(exchange(false, kShm) == 0);
  CHECK(exchange(true, kShm) > 0);
}

TEST_CASE("host buffers: misuse is refused", "[host_buffers][errors]") {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Ok;
  };
  CHECK(code_of([] { (void)host_alloc(0); }) == ErrorCode::InvalidArgument);
  int local = 0;
  CHECK(code_of([&] { host_free(&local); }) == ErrorCode::InvalidArgument);
  void* p = host_alloc(100);
  CHECK(code_of([&] { host_free(static_cast<char*>(p) + 1); }) == ErrorCode::InvalidArgument);
  host_free(p);
  CHECK(code_of([&] { host_free(p); }) == ErrorCode::InvalidArgument);  // twice
  host_free(nullptr);
}

TEST_CASE("single copy: process_vm_readv pays for every message only at memcpy's rate",
          "[host_buffers][shm]") {
  using transport::shm::CopyRates;
  // The slot path's two copies overlap on two CPUs: half of memcpy's rate does not pay.
  CHECK_FALSE(CopyRates{7.0, 13.3}.single_copy_pays());
  CHECK_FALSE(CopyRates{9.9, 10.0}.single_copy_pays());
  CHECK(CopyRates{10.0, 10.0}.single_copy_pays());
  CHECK(CopyRates{12.0, 10.0}.single_copy_pays());
  CHECK_FALSE(CopyRates{0.0, 0.0}.single_copy_pays());  // refused here: never
  const CopyRates& here = transport::shm::measured_copy_rates();
  CHECK(here.memcpy_gbs > 0);
  CHECK(here.single_copy_gbs >= 0);
}
