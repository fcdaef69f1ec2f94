// Single-copy reads of ordinary (not loom::host_alloc) buffers over shm, threads as ranks: which
// messages take the route (the receiver's published reads, the sender's size limit, reductions
// only where process_vm_readv copies at memcpy's rate), that it is taken (the bytes read with
// process_vm_readv), exact results of sendrecv, broadcast and allreduce through it for every
// element size, and the slots alone with LOOM_SHM_SINGLE_COPY=off.
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collective/kinds.hpp"
#include "comm_harness.hpp"
#include "reference.hpp"
#include "transports/shm/shm_policy.hpp"
#include "transports/shm/single_copy.hpp"

using namespace loom;
using loom::test::Findings;
namespace shm = loom::transport::shm;

namespace {

bool reads_allowed() {
  return shm::measured_copy_rates().single_copy_gbs > 0;
}

std::uint8_t byte_of(int src, std::size_t i) {
  return static_cast<std::uint8_t>(src * 29 + static_cast<int>(i % 251) + 3);
}

// Runs `body` on n ranks; checks its findings; returns the bytes read with process_vm_readv.
std::uint64_t cma_read_by(int n, const std::function<void(Communicator&, Findings&)>& body,
                          std::map<std::string, std::string> settings) {
  Findings f;
  settings["LOOM_TRANSPORTS"] = "shm";
  const std::uint64_t before = shm::cma_bytes_received();
  loom::test::run_ranks(
      n, [&](Communicator& comm) { body(comm, f); }, std::move(settings));
  INFO(f.first);
  CHECK(f.wrong == 0);
  return shm::cma_bytes_received() - before;
}

// A sendrecv of `bytes` bytes around the ring of n ranks, each rank's bytes distinct.
void ring_sendrecv(Communicator& comm, Findings& f, DataType t, std::size_t bytes) {
  const int r = comm.rank(), n = comm.size();
  const std::size_t es = dtype_size(t), count = bytes / es;
  std::vector<std::uint8_t> out(count * es), in(count * es + 1, 0xee);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = byte_of(r, i);
  const int prev = (r + n - 1) % n;
  comm.sendrecv(out.data(), count, (r + 1) % n, in.data(), count, prev, t, 5).wait();
  for (std::size_t i = 0; i < out.size(); ++i)
    if (in[i] != byte_of(prev, i))
      return f.add(fmt::format("sendrecv {} rank {} byte {}", to_string(t), r, i));
  if (in.back() != 0xee)
    f.add(fmt::format("sendrecv {} rank {}: wrote past the end", to_string(t), r));
}

}  // namespace

TEST_CASE("single copy: what a receiver reads in place under auto", "[shm][single_copy]") {
  using shm::CopyRates;
  CHECK(CopyRates{12.0, 10.0}.auto_reads() == shm::kReadsAll);
  CHECK(CopyRates{10.0, 10.0}.auto_reads() == shm::kReadsAll);
  // Slower than memcpy: copies only, of at most the sender's LOOM_SHM_SINGLE_COPY_MAX.
  CHECK(CopyRates{5.0, 13.0}.auto_reads() == shm::kReadsCopies);
  const shm::SingleCopyMax own = shm::auto_single_copy_max(256 << 10, 1.0);
  CHECK(own.any == std::size_t{256} << 10);
  CHECK(own.exchange == std::size_t{256} << 10);
  const shm::SingleCopyMax shared = shm::auto_single_copy_max(256 << 10, 2.0);
  CHECK(shared.any == std::size_t{256} << 10);
  CHECK(shared.exchange == shm::kNoLimit);
  using coll::CollKind;
  for (CollKind k : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::Reduce})
    CHECK(shm::message_may_be_reduced(static_cast<std::uint8_t>(k)));
  for (CollKind k :
       {CollKind::AllGather, CollKind::Broadcast, CollKind::Barrier, CollKind::AllToAll,
        CollKind::AllToAllV, CollKind::Gather, CollKind::Scatter, CollKind::P2P})
    CHECK_FALSE(shm::message_may_be_reduced(static_cast<std::uint8_t>(k)));
  for (CollKind k : {CollKind::AllToAll, CollKind::AllToAllV, CollKind::P2P})
    CHECK(shm::message_is_exchange(static_cast<std::uint8_t>(k)));
  for (CollKind k : {CollKind::AllReduce, CollKind::AllGather, CollKind::Broadcast,
                     CollKind::Gather, CollKind::Scatter})
    CHECK_FALSE(shm::message_is_exchange(static_cast<std::uint8_t>(k)));
}

TEST_CASE("single copy: sendrecv from ordinary buffers takes the route, every element size",
          "[shm][single_copy][p2p]") {
  const std::size_t bytes = std::size_t{256} << 10;  // from the auto minimum to its maximum
  for (int n : {2, 3}) {
    INFO(n << " ranks");
    const std::uint64_t read = cma_read_by(n,
                                           [&](Communicator& comm, Findings& f) {
                                             for (DataType t : loom::test::kAllTypes)
                                               ring_sendrecv(comm, f, t, bytes);
                                           },
                                           {});
    const std::uint64_t all = bytes * static_cast<std::uint64_t>(n) * std::size(test::kAllTypes);
    if (reads_allowed())
      CHECK(read == all);  // every message read in place, once
    else
      CHECK(read == 0);
  }
}

TEST_CASE("single copy: off, or above the size limit, goes through the slots",
          "[shm][single_copy][p2p]") {
  const std::size_t bytes = (std::size_t{256} << 10) + 8;
  auto sendrecv = [&](Communicator& comm, Findings& f) {
    ring_sendrecv(comm, f, DataType::Float64, bytes);
  };
  CHECK(cma_read_by(2, sendrecv, {{"LOOM_SHM_SINGLE_COPY", "off"}}) == 0);
  const std::uint64_t limited = cma_read_by(2, sendrecv, {{"LOOM_SHM_SINGLE_COPY_MAX", "128K"}});
  if (!reads_allowed() || !shm::measured_copy_rates().single_copy_pays())
    CHECK(limited == 0);  // the limit holds where the reads are slower than memcpy
  else
    CHECK(limited == 2 * bytes);  // no limit where they are not
}

TEST_CASE("single copy: reductions read in place only where it pays; broadcast from every root",
          "[shm][single_copy][collectives]") {
  const std::size_t count = (std::size_t{1} << 20) / 4 + 3;  // 1 MiB and an odd count
  auto allreduce = [&](Communicator& comm, Findings& f) {
    std::vector<float> send(count), recv(count, -1);
    for (std::size_t i = 0; i < count; ++i)
      send[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 1000));
    comm.allreduce(send.data(), recv.data(), count, DataType::Float32, RedOp::Sum).wait();
    const int factor = comm.size() * (comm.size() + 1) / 2;
    for (std::size_t i = 0; i < count; ++i)
      if (recv[i] != static_cast<float>(factor * static_cast<int>(i % 1000)))
        return f.add(fmt::format("allreduce rank {} element {}: {}", comm.rank(), i, recv[i]));
  };
  const std::map<std::string, std::string> ring = {{"LOOM_ALGO", "ring"},
                                                   {"LOOM_SHM_SINGLE_COPY_MIN", "4K"}};
  const std::uint64_t auto_read = cma_read_by(2, allreduce, ring);
  if (!reads_allowed() || !shm::measured_copy_rates().single_copy_pays()) CHECK(auto_read == 0);
  if (reads_allowed()) {
    auto on = ring;
    on["LOOM_SHM_SINGLE_COPY"] = "on";
    CHECK(cma_read_by(2, allreduce, on) > 0);
  }
  // Broadcast: copies, so read in place under auto; every root, 3 ranks, an odd byte count.
  const std::size_t bytes = (std::size_t{300} << 10) + 5;
  const std::uint64_t bcast = cma_read_by(
      3,
      [&](Communicator& comm, Findings& f) {
        for (int root = 0; root < comm.size(); ++root) {
          std::vector<std::uint8_t> buf(bytes + 1, 0xee);
          if (comm.rank() == root)
            for (std::size_t i = 0; i < bytes; ++i) buf[i] = byte_of(root, i);
          comm.broadcast(buf.data(), buf.data(), bytes, DataType::Uint8, root).wait();
          for (std::size_t i = 0; i < bytes; ++i)
            if (buf[i] != byte_of(root, i))
              return f.add(fmt::format("broadcast root {} rank {} byte {}", root, comm.rank(), i));
          if (buf[bytes] != 0xee) f.add("broadcast wrote past the end");
        }
      },
      {{"LOOM_SHM_SINGLE_COPY_MIN", "4K"}, {"LOOM_SHM_SINGLE_COPY_MAX", "64M"}});
  if (reads_allowed())
    CHECK(bcast > 0);
  else
    CHECK(bcast == 0);
}
