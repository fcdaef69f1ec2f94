// Every collective x dtype x op, in place and out of place, between threads as ranks over real
// TCP (1, 2, 3, 4, 5, 8 ranks) and shared memory (1 to 8 ranks); counts 0, 1, primes and
// non-multiples of nranks.
#include <catch2/catch.hpp>
#include <cstring>

#include "comm_harness.hpp"
#include "reference.hpp"
#include "transports/ofi/ofi_fabric.hpp"

using namespace loom;
using loom::test::fill_input;
using loom::test::input_value;
using loom::test::kAllOps;
using loom::test::kAllTypes;
using loom::test::ops_for;
using loom::test::store_expected;
using loom::test::store_value;

namespace {

std::vector<std::size_t> counts_for(int n) {
  return {0, 1, 7, 13, static_cast<std::size_t>(n) * 5 + 1, 1031};
}

// Compares element by element; returns the number of wrong elements and remembers the first.
struct Checker {
  std::size_t wrong = 0;
  std::string first;
  void element(const void* got, const void* want, std::size_t es, const std::string& where) {
    if (std::memcmp(got, want, es) == 0) return;
    if (wrong++ == 0) first = where;
  }
};

std::string where(const char* coll, DataType t, RedOp op, std::size_t count, bool in_place,
                  int rank, std::size_t i) {
  return fmt::format("{} {} {} count {} {} rank {} element {}", coll, to_string(t), to_string(op),
                     count, in_place ? "in-place" : "out-of-place", rank, i);
}

void check_reductions(Communicator& comm, Checker& chk) {
  const int n = comm.size(), r = comm.rank();
  std::vector<std::uint8_t> send, recv, want(8);
  for (DataType t : kAllTypes)
    for (RedOp op : ops_for(t))
      for (std::size_t count : counts_for(n))
        for (bool ip : {false, true}) {
          const std::size_t es = dtype_size(t);
          const int root = static_cast<int>(count % static_cast<std::size_t>(n));
          // allreduce
          send.assign(count * es + 1, 0);
          recv.assign(count * es + 1, 0xee);
          fill_input(t, op, r, send.data(), count);
          void* out = ip ? send.data() : recv.data();
          comm.allreduce(send.data(), out, count, t, op).wait();
          for (std::size_t i = 0; i < count; ++i) {
            store_expected(t, op, n, i, want.data());
            chk.element(static_cast<std::uint8_t*>(out) + i * es, want.data(), es,
                        where("allreduce", t, op, count, ip, r, i));
          }
          // reduce
          fill_input(t, op, r, send.data(), count);
          recv.assign(count * es + 1, 0xee);
          out = ip ? send.data() : recv.data();
          comm.reduce(send.data(), out, count, t, op, root).wait();
          if (r == root)
            for (std::size_t i = 0; i < count; ++i) {
              store_expected(t, op, n, i, want.data());
              chk.element(static_cast<std::uint8_t*>(out) + i * es, want.data(), es,
                          where("reduce", t, op, count, ip, r, i));
            }
          // reduce_scatter: rank q's input block b holds input_value(t, op, q, b * count + i)
          send.assign(count * es * static_cast<std::size_t>(n) + 1, 0);
          fill_input(t, op, r, send.data(), count * static_cast<std::size_t>(n));
          recv.assign(count * es + 1, 0xee);
          out = ip ? send.data() + static_cast<std::size_t>(r) * count * es : recv.data();
          comm.reduce_scatter(send.data(), out, count, t, op).wait();
          for (std::size_t i = 0; i < count; ++i) {
            store_expected(t, op, n, static_cast<std::size_t>(r) * count + i, want.data());
            chk.element(static_cast<std::uint8_t*>(out) + i * es, want.data(), es,
                        where("reduce_scatter", t, op, count, ip, r, i));
          }
        }
}

void check_data_movement(Communicator& comm, Checker& chk) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
  std::vector<std::uint8_t> send, recv, want(8);
  for (DataType t : kAllTypes)
    for (std::size_t count : counts_for(n))
      for (bool ip : {false, true}) {
        const std::size_t es = dtype_size(t);
        const int root = static_cast<int>((count + 1) % un);
        // allgather: rank q contributes input_value(t, Sum, q, i)
        recv.assign(count * es * un + 1, 0xee);
        send.assign(count * es + 1, 0);
        void* in = ip ? recv.data() + ur * count * es : send.data();
        fill_input(t, RedOp::Sum, r, in, count);
        comm.allgather(in, recv.data(), count, t).wait();
        for (std::size_t q = 0; q < un; ++q)
          for (std::size_t i = 0; i < count; ++i) {
            store_value(t, want.data(), input_value(t, RedOp::Sum, static_cast<int>(q), i));
            chk.element(recv.data() + (q * count + i) * es, want.data(), es,
                        where("allgather", t, RedOp::Sum, count, ip, r, q * count + i));
          }
        // broadcast
        send.assign(count * es + 1, 0);
        recv.assign(count * es + 1, 0xee);
        if (r == root) fill_input(t, RedOp::Sum, root, send.data(), count);
        void* out = ip ? send.data() : recv.data();
        comm.broadcast(send.data(), out, count, t, root).wait();
        for (std::size_t i = 0; i < count; ++i) {
          store_value(t, want.data(), input_value(t, RedOp::Sum, root, i));
          chk.element(static_cast<std::uint8_t*>(out) + i * es, want.data(), es,
                      where("broadcast", t, RedOp::Sum, count, ip, r, i));
        }
      }
  comm.barrier().wait();
}

void run_matrix(int n, std::map<std::string, std::string> settings = {}) {
  std::mutex mu;
  std::size_t wrong = 0;
  std::string first;
  loom::test::run_ranks(
      n,
      [&](Communicator& comm) {
        Checker chk;
        check_reductions(comm, chk);
        check_data_movement(comm, chk);
        std::lock_guard lock(mu);
        wrong += chk.wrong;
        if (first.empty()) first = chk.first;
      },
      std::move(settings));
  INFO("first wrong: " << first);
  REQUIRE(wrong == 0);
}

}  // namespace

// The same matrix over each transport: tcp forced with LOOM_TRANSPORTS, and shm (the default
// between ranks of one host) for every rank count from 1 to 8. One test case per count keeps
// each within the per-test time limit on a loaded machine.
TEST_CASE("collectives: full matrix over tcp with 1 rank", "[collectives][tcp]") {
  run_matrix(1, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over tcp with 2 ranks", "[collectives][tcp]") {
  run_matrix(2, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over tcp with 3 ranks", "[collectives][tcp]") {
  run_matrix(3, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over tcp with 4 ranks", "[collectives][tcp]") {
  run_matrix(4, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over tcp with 5 ranks", "[collectives][tcp]") {
  run_matrix(5, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over tcp with 8 ranks", "[collectives][tcp]") {
  run_matrix(8, {{"LOOM_TRANSPORTS", "tcp"}});
}
TEST_CASE("collectives: full matrix over shm with 1 rank", "[collectives][shm]") {
  run_matrix(1, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 2 ranks", "[collectives][shm]") {
  run_matrix(2, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 3 ranks", "[collectives][shm]") {
  run_matrix(3, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 4 ranks", "[collectives][shm]") {
  run_matrix(4, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 5 ranks", "[collectives][shm]") {
  run_matrix(5, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 6 ranks", "[collectives][shm]") {
  run_matrix(6, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 7 ranks", "[collectives][shm]") {
  run_matrix(7, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: full matrix over shm with 8 ranks", "[collectives][shm]") {
  run_matrix(8, {{"LOOM_TRANSPORTS", "shm"}});
}
TEST_CASE("collectives: shm with large calls through the arena in small pieces",
          "[collectives][shm][arena_pieces]") {
  // One-step calls up to 64 bytes per rank; above, allreduce, allgather and reduce_scatter in
  // pieces of 4 KiB per rank: the matrix's counts span several pieces and leave blocks shorter
  // than one element per rank.
  for (int n : {3, 5, 8}) {
    INFO(n << " ranks");
    run_matrix(n, {{"LOOM_TRANSPORTS", "shm"},
                   {"LOOM_SHM_ONESHOT_MAX", "64"},
                   {"LOOM_SHM_ARENA_PIECE", "4K"}});
  }
}
TEST_CASE("collectives: shm with tiny slots splits every message into many fragments",
          "[collectives][shm]") {
  run_matrix(3, {{"LOOM_TRANSPORTS", "shm"},
                 {"LOOM_SHM_SLOT_SIZE", "64"},
                 {"LOOM_SHM_SLOTS", "2"},
                 {"LOOM_CHUNK_SIZE", "256"}});
}
TEST_CASE("collectives: shm single copy (process_vm_readv) for every message of 64 B or more",
          "[collectives][shm]") {
  for (int n : {2, 3, 5}) {
    INFO(n << " ranks");
    run_matrix(n, {{"LOOM_TRANSPORTS", "shm"},
                   {"LOOM_SHM_SINGLE_COPY", "on"},
                   {"LOOM_SHM_SINGLE_COPY_MIN", "64"},
                   {"LOOM_CHUNK_SIZE", "1K"}});
  }
}
TEST_CASE("collectives: shm slot orders, each where auto would choose the other",
          "[collectives][shm]") {
  // auto reuses the first slot of an empty channel where a CPU runs more than two ranks (5+
  // ranks here) and rotates otherwise; small slots make messages span and wrap the ring.
  for (auto [n, order] : {std::pair{2, "reuse"}, std::pair{5, "rotate"}}) {
    INFO(n << " ranks, " << order);
    run_matrix(n, {{"LOOM_TRANSPORTS", "shm"},
                   {"LOOM_SHM_SLOT_ORDER", order},
                   {"LOOM_SHM_SLOT_SIZE", "512"},
                   {"LOOM_SHM_SLOTS", "3"},
                   {"LOOM_CHUNK_SIZE", "2K"}});
  }
}
TEST_CASE("collectives: shm with single copy off uses the slot rings only", "[collectives][shm]") {
  run_matrix(4, {{"LOOM_TRANSPORTS", "shm"},
                 {"LOOM_SHM_SINGLE_COPY", "off"},
                 {"LOOM_SHM_SINGLE_COPY_MIN", "64"}});
}
TEST_CASE("collectives: shm without spinning blocks on the doorbell for every wait",
          "[collectives][shm]") {
  run_matrix(4, {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_SPIN_US", "0"}, {"LOOM_YIELD_US", "0"}});
}
TEST_CASE("collectives: shm with long yields and spins where ranks share CPUs",
          "[collectives][shm]") {
  run_matrix(5, {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_SPIN_US", "50"}, {"LOOM_YIELD_US", "2000"}});
}

TEST_CASE("collectives: small chunks and one socket and depth 1", "[collectives]") {
  run_matrix(3, {{"LOOM_TRANSPORTS", "tcp"},
                 {"LOOM_CHUNK_SIZE", "64"},
                 {"LOOM_SOCKETS_PER_PEER", "1"},
                 {"LOOM_PIPELINE_DEPTH", "1"}});
}
TEST_CASE("collectives: small chunks and four sockets and deep pipeline", "[collectives]") {
  run_matrix(4, {{"LOOM_TRANSPORTS", "tcp"},
                 {"LOOM_CHUNK_SIZE", "256"},
                 {"LOOM_SOCKETS_PER_PEER", "4"},
                 {"LOOM_PIPELINE_DEPTH", "8"}});
}

// Every collective under each forced algorithm and in deterministic mode.
TEST_CASE("collectives: full matrix with LOOM_ALGO=tree at 3 ranks", "[collectives][tree]") {
  run_matrix(3, {{"LOOM_ALGO", "tree"}, {"LOOM_CHUNK_SIZE", "256"}});
}
TEST_CASE("collectives: full matrix with LOOM_ALGO=tree at 5 ranks", "[collectives][tree]") {
  run_matrix(5, {{"LOOM_ALGO", "tree"}});
}
TEST_CASE("collectives: full matrix with LOOM_ALGO=tree at 8 ranks", "[collectives][tree]") {
  run_matrix(8, {{"LOOM_ALGO", "tree"}, {"LOOM_PIPELINE_DEPTH", "1"}});
}
// Recursive doubling (allreduce only; the other collectives fall back to their ring/chain):
// powers of two, the fold of 1..3 extra ranks, and a single rank, at every size of the matrix
// (forced, so above the size the selector would use it for too).
TEST_CASE("collectives: full matrix with LOOM_ALGO=rd at 1..8 ranks", "[collectives][rd]") {
  for (int n = 1; n <= 8; ++n) {
    INFO("ranks " << n);
    run_matrix(n, {{"LOOM_ALGO", "rd"}});
  }
}
// Bruck's log-depth allgather and reduce-scatter (the other collectives stay auto) at odd rank
// counts and a power of two, over shm and tcp.
TEST_CASE("collectives: full matrix with LOOM_ALGO=bruck over shm at 2, 3, 5, 7 ranks",
          "[collectives][bruck]") {
  for (int n : {2, 3, 5, 7}) {
    INFO("ranks " << n);
    run_matrix(n, {{"LOOM_ALGO", "bruck"}});
  }
}
TEST_CASE("collectives: full matrix with LOOM_ALGO=bruck over tcp at 3, 4, 5, 7 ranks",
          "[collectives][bruck][tcp]") {
  for (int n : {3, 4, 5, 7}) {
    INFO("ranks " << n);
    run_matrix(n, {{"LOOM_ALGO", "bruck"}, {"LOOM_TRANSPORTS", "tcp"}});
  }
}
TEST_CASE("collectives: full matrix with per-collective LOOM_ALGO", "[collectives][tree]") {
  run_matrix(4, {{"LOOM_ALGO", "allreduce:tree,broadcast:ring,reduce:tree"}});
}
TEST_CASE("collectives: full matrix in deterministic mode at 3 ranks",
          "[collectives][deterministic]") {
  run_matrix(3, {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_CHUNK_SIZE", "128"}});
}
TEST_CASE("collectives: full matrix in deterministic mode at 5 ranks",
          "[collectives][deterministic]") {
  run_matrix(5, {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_ALGO", "tree"}});
}

// The ofi transport (libfabric's tcp;ofi_rxm provider; skipped where it is missing) carries
// every peer: the whole matrix at several rank counts, odd ones included.
namespace {
void run_matrix_over_ofi(int n) {
  if (!loom::transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: skipped");
    return;
  }
  run_matrix(n, {{"LOOM_TRANSPORTS", "ofi"},
                 {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
                 {"LOOM_OFI_FALLBACK", "false"}});
}
}  // namespace

TEST_CASE("collectives: full matrix over ofi with 1 rank", "[collectives][ofi]") {
  run_matrix_over_ofi(1);
}
TEST_CASE("collectives: full matrix over ofi with 2 ranks", "[collectives][ofi]") {
  run_matrix_over_ofi(2);
}
TEST_CASE("collectives: full matrix over ofi with 3 ranks", "[collectives][ofi]") {
  run_matrix_over_ofi(3);
}
TEST_CASE("collectives: full matrix over ofi with 5 ranks", "[collectives][ofi]") {
  run_matrix_over_ofi(5);
}
TEST_CASE("collectives: full matrix over ofi with 4 ranks", "[collectives][ofi]") {
  run_matrix_over_ofi(4);
}
