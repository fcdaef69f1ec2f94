// alltoall, alltoallv, gather and scatter through the Communicator, threads as ranks, over shm,
// tcp and ofi: every element lands where the call says for every element size (each data type),
// odd rank counts, uneven and zero blocks, displacements with gaps (never written), every root,
// in and out of place; bad arguments are InvalidArgument and counts that disagree between two
// ranks are Mismatch naming both. Over shm also with every message read in place from the
// sender's ordinary buffer (process_vm_readv), and with that route forced off.
#include <catch2/catch.hpp>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "comm_harness.hpp"
#include "end_together.hpp"
#include "reference.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/shm/single_copy.hpp"

using namespace loom;
using loom::test::error_of;
using loom::test::Findings;

namespace {

constexpr std::uint8_t kExchangeGuard = 0xa5;

// Byte b of element i of the block that rank `src` sends to rank `dst`: distinct per source,
// destination and position, so a block that lands in the wrong place is seen.
std::uint8_t byte_of(int src, int dst, std::size_t i, std::size_t b) {
  return static_cast<std::uint8_t>(src * 53 + dst * 17 + static_cast<int>(i * 7 + b) + 1);
}

void fill_block(std::uint8_t* at, int src, int dst, std::size_t count, std::size_t es) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < es; ++b) at[i * es + b] = byte_of(src, dst, i, b);
}

// Counts the elements of `count` at `at` that differ from the block src -> dst.
void expect_block(Findings& f, const std::uint8_t* at, int src, int dst, std::size_t count,
                  std::size_t es, const std::string& where) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < es; ++b)
      if (at[i * es + b] != byte_of(src, dst, i, b))
        return f.add(where + ": element " + std::to_string(i) + " of the block from rank " +
                     std::to_string(src));
}

void expect_guard(Findings& f, const std::vector<std::uint8_t>& buf, std::size_t from,
                  std::size_t to, const std::string& where) {
  for (std::size_t i = from; i < to && i < buf.size(); ++i)
    if (buf[i] != kExchangeGuard)
      return f.add(where + ": byte " + std::to_string(i) + " was written");
}

std::string where(const char* call, DataType t, std::size_t count, bool in_place, int rank) {
  return std::string(call) + " " + std::string(to_string(t)) + " count " + std::to_string(count) +
         (in_place ? " in place" : "") + " on rank " + std::to_string(rank);
}

void check_alltoall(Communicator& comm, Findings& f, DataType t, std::size_t count, bool ip) {
  const int r = comm.rank(), n = comm.size();
  const std::size_t es = dtype_size(t), block = count * es, un = static_cast<std::size_t>(n);
  std::vector<std::uint8_t> send(un * block + 1, kExchangeGuard),
      recv(un * block + 1, kExchangeGuard);
  for (int p = 0; p < n; ++p) fill_block(send.data() + std::size_t(p) * block, r, p, count, es);
  std::uint8_t* out = ip ? send.data() : recv.data();
  comm.alltoall(send.data(), out, count, t).wait();
  for (int p = 0; p < n; ++p)
    expect_block(f, out + std::size_t(p) * block, p, r, count, es,
                 where("alltoall", t, count, ip, r));
  expect_guard(f, ip ? send : recv, un * block, un * block + 1, where("alltoall", t, count, ip, r));
}

// Rank r sends c(r, p) elements to rank p: uneven, zero for some pairs, symmetric when in place.
std::size_t vcount(int r, int p, std::size_t scale, bool symmetric) {
  if (symmetric && r > p) return vcount(p, r, scale, true);
  return static_cast<std::size_t>((r * 7 + p * 3) % 5) * scale;
}

// Blocks in reverse rank order with a one-element gap after each.
std::vector<std::size_t> gapped(const std::vector<std::size_t>& counts, std::size_t& extent) {
  std::vector<std::size_t> displs(counts.size());
  extent = 0;
  for (std::size_t p = counts.size(); p-- > 0;) {
    displs[p] = extent;
    extent += counts[p] + 1;
  }
  return displs;
}

void check_alltoallv(Communicator& comm, Findings& f, DataType t, std::size_t scale, bool ip) {
  const int r = comm.rank(), n = comm.size();
  const std::size_t es = dtype_size(t);
  std::vector<std::size_t> sc(static_cast<std::size_t>(n)), rc(sc.size());
  for (int p = 0; p < n; ++p) {
    sc[std::size_t(p)] = vcount(r, p, scale, ip);
    rc[std::size_t(p)] = vcount(p, r, scale, ip);
  }
  std::size_t send_extent = 0, recv_extent = 0;
  const std::vector<std::size_t> sd = gapped(sc, send_extent), rd = gapped(rc, recv_extent);
  std::vector<std::uint8_t> send(send_extent * es, kExchangeGuard),
      recv(recv_extent * es, kExchangeGuard);
  for (int p = 0; p < n; ++p)
    fill_block(send.data() + sd[std::size_t(p)] * es, r, p, sc[std::size_t(p)], es);
  std::vector<std::uint8_t>& out = ip ? send : recv;
  comm.alltoallv(send.data(), sc, sd, out.data(), rc, rd, t).wait();
  const std::string at = where("alltoallv", t, scale, ip, r);
  for (int p = 0; p < n; ++p) {
    const std::size_t d = rd[std::size_t(p)], c = rc[std::size_t(p)];
    expect_block(f, out.data() + d * es, p, r, c, es, at);
    expect_guard(f, out, (d + c) * es, (d + c + 1) * es, at);  // the gap after each block
  }
}

void check_rooted(Communicator& comm, Findings& f, DataType t, std::size_t count, bool ip,
                  int root) {
  const int r = comm.rank(), n = comm.size();
  const std::size_t es = dtype_size(t), block = count * es, un = static_cast<std::size_t>(n);
  // gather: block r of the root's buffer comes from rank r.
  std::vector<std::uint8_t> many(un * block + 1, kExchangeGuard), one(block + 1, kExchangeGuard);
  fill_block(one.data(), r, root, count, es);
  const void* gsend = one.data();
  if (ip && r == root) {
    fill_block(many.data() + std::size_t(r) * block, r, root, count, es);
    gsend = many.data() + std::size_t(r) * block;
  }
  comm.gather(gsend, r == root ? many.data() : nullptr, count, t, root).wait();
  if (r == root)
    for (int p = 0; p < n; ++p)
      expect_block(f, many.data() + std::size_t(p) * block, p, root, count, es,
                   where("gather", t, count, ip, r));
  if (r == root)
    expect_guard(f, many, un * block, un * block + 1, where("gather", t, count, ip, r));
  // scatter: rank r receives block r of the root's buffer.
  many.assign(many.size(), kExchangeGuard);
  one.assign(one.size(), kExchangeGuard);
  if (r == root)
    for (int p = 0; p < n; ++p)
      fill_block(many.data() + std::size_t(p) * block, root, p, count, es);
  void* srecv = ip && r == root ? many.data() + std::size_t(r) * block : one.data();
  comm.scatter(r == root ? many.data() : nullptr, srecv, count, t, root).wait();
  expect_block(f, static_cast<std::uint8_t*>(srecv), root, r, count, es,
               where("scatter", t, count, ip, r));
  if (srecv == one.data())
    expect_guard(f, one, block, block + 1, where("scatter", t, count, ip, r));
}

// Every data type (each element size, fp8 included), counts 0, 1, odd and large, in and out of
// place, every root for the rooted calls.
void run_exchange_matrix(int n, std::map<std::string, std::string> settings) {
  Findings f;
  loom::test::run_ranks(
      n,
      [&](Communicator& comm) {
        for (DataType t : loom::test::kAllTypes)
          for (bool ip : {false, true}) {
            for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{37}})
              check_alltoall(comm, f, t, count, ip);
            for (std::size_t scale : {std::size_t{1}, std::size_t{13}})
              check_alltoallv(comm, f, t, scale, ip);
            for (int root = 0; root < n; ++root) check_rooted(comm, f, t, 5, ip, root);
          }
        // Large blocks: many chunks per message.
        for (bool ip : {false, true}) {
          check_alltoall(comm, f, DataType::Float32, std::size_t{300} << 10, ip);
          check_alltoallv(comm, f, DataType::Int64, std::size_t{40} << 10, ip);
          check_rooted(comm, f, DataType::BFloat16, std::size_t{200} << 10, ip, n / 2);
        }
        check_rooted(comm, f, DataType::Int32, 0, false, n - 1);
        comm.barrier().wait();
      },
      std::move(settings));
  INFO("first wrong: " << f.first);
  CHECK(f.wrong == 0);
}

std::map<std::string, std::string> over(const std::string& transports) {
  return {{"LOOM_TRANSPORTS", transports}};
}

}  // namespace

TEST_CASE("exchange calls: full matrix over shm at 1, 2, 3 and 5 ranks", "[exchange][shm]") {
  for (int n : {1, 2, 3, 5}) {
    INFO(n << " ranks");
    run_exchange_matrix(n, over("shm"));
  }
}

TEST_CASE("exchange calls: full matrix over shm at 8 ranks", "[exchange][shm]") {
  run_exchange_matrix(8, over("shm"));
}

// LOOM_SHM_SINGLE_COPY_MIN=1: every message of a call that goes through the connections (not
// the arena) is read in place where single copy is on or auto, none where it is off.
TEST_CASE("exchange calls: full matrix over shm with single-copy reads on, auto and off",
          "[exchange][shm][single_copy]") {
  const bool allowed = transport::shm::measured_copy_rates().single_copy_gbs > 0;
  if (!allowed) WARN("process_vm_readv is refused here: only the fallback to the slots runs");
  for (const std::string mode : {"on", "auto", "off"}) {
    if (mode == "on" && !allowed) continue;  // on is an error where the probe read fails
    for (int n : {2, 3, 5}) {
      INFO(n << " ranks, LOOM_SHM_SINGLE_COPY=" << mode);
      const std::uint64_t before = transport::shm::cma_bytes_received();
      run_exchange_matrix(n, {{"LOOM_TRANSPORTS", "shm"},
                              {"LOOM_SHM_SINGLE_COPY", mode},
                              {"LOOM_SHM_SINGLE_COPY_MIN", "1"},
                              {"LOOM_SHM_SINGLE_COPY_MAX", "64M"}});
      const std::uint64_t read = transport::shm::cma_bytes_received() - before;
      if (mode == "off" || !allowed)
        CHECK(read == 0);
      else
        CHECK(read > 0);
    }
  }
}

TEST_CASE("exchange calls: full matrix over tcp at 2, 3 and 4 ranks", "[exchange][tcp]") {
  for (int n : {2, 3, 4}) {
    INFO(n << " ranks");
    run_exchange_matrix(n, over("tcp"));
  }
}

TEST_CASE("exchange calls: full matrix over ofi at 3 ranks", "[exchange][ofi]") {
  if (!loom::transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: skipped");
    return;
  }
  run_exchange_matrix(3, {{"LOOM_TRANSPORTS", "ofi"},
                          {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
                          {"LOOM_OFI_FALLBACK", "false"}});
}

TEST_CASE("exchange calls: the typed span forms", "[exchange]") {
  Findings f;
  loom::test::run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::int32_t> send(6), recv(6, -1);
    for (int i = 0; i < 6; ++i) send[std::size_t(i)] = r * 100 + i;
    comm.alltoall(std::span<const std::int32_t>(send), std::span<std::int32_t>(recv)).wait();
    for (int p = 0; p < 3; ++p)
      for (int j = 0; j < 2; ++j)
        if (recv[std::size_t(2 * p + j)] != p * 100 + 2 * r + j) f.add("alltoall span");
    // Rank r sends r + 1 elements to everyone (packed); receives p + 1 from rank p.
    std::vector<std::size_t> sc(3, std::size_t(r) + 1), rc{1, 2, 3};
    std::vector<float> vs(3 * (std::size_t(r) + 1), float(r)), vr(6, -1.0f);
    comm.alltoallv(std::span<const float>(vs), sc, std::span<float>(vr), rc).wait();
    const std::vector<float> want{0, 1, 1, 2, 2, 2};
    if (vr != want) f.add("alltoallv span on rank " + std::to_string(r));
    std::vector<std::int64_t> one{r + 7}, all(r == 1 ? 3 : 0, -1);
    comm.gather(std::span<const std::int64_t>(one), std::span<std::int64_t>(all), 1).wait();
    if (r == 1 && all != std::vector<std::int64_t>{7, 8, 9}) f.add("gather span");
    std::vector<std::int64_t> parts(r == 2 ? 3 : 0), mine(1, -1);
    for (std::size_t i = 0; i < parts.size(); ++i) parts[i] = std::int64_t(i) * 10;
    comm.scatter(std::span<const std::int64_t>(parts), std::span<std::int64_t>(mine), 2).wait();
    if (mine[0] != r * 10) f.add("scatter span on rank " + std::to_string(r));
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("exchange calls: bad arguments are InvalidArgument naming the call",
          "[exchange][errors]") {
  Findings f;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> a(8), b(8);
    auto refused = [&](const char* what, const std::function<void()>& call) {
      auto e = loom::test::catch_error(call);
      const std::string msg = e.what();
      if (e.code() != ErrorCode::InvalidArgument || msg.find(what) == std::string::npos ||
          msg.find("rank " + std::to_string(r)) == std::string::npos)
        f.add(std::string(what) + ": " + msg);
    };
    const std::vector<std::size_t> two{1, 1}, three{1, 1, 1}, zero{0, 0}, shifted{0, 2};
    refused("alltoallv",
            [&] { comm.alltoallv(a.data(), three, three, b.data(), two, two, DataType::Float32); });
    // In place needs the same layout both ways.
    refused("alltoallv", [&] {
      comm.alltoallv(a.data(), two, zero, a.data(), two, shifted, DataType::Float32);
    });
    refused("gather", [&] { comm.gather(a.data(), b.data(), 2, DataType::Float32, 2); });
    refused("scatter", [&] { comm.scatter(a.data(), b.data(), 2, DataType::Float32, -1); });
    refused("gather", [&] { comm.gather(a.data(), nullptr, 2, DataType::Float32, r); });
    refused("scatter", [&] { comm.scatter(nullptr, b.data(), 2, DataType::Float32, r); });
    refused("alltoall", [&] { comm.alltoall(a.data(), a.data() + 1, 4, DataType::Float32); });
    refused("alltoall", [&] {
      comm.alltoall(std::span<const float>(a.data(), 7), std::span<float>(b.data(), 7));
    });
    refused("alltoallv send",
            [&] { comm.alltoallv(std::span<const float>(a), two, std::span<float>(b), two); });
    comm.barrier().wait();  // nothing above reached the wire
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// Rank 0 expects 3 elements from rank 1, which sends 4: both ranks fail with Mismatch naming
// both, instead of a receive that waits for ever or a buffer overrun.
TEST_CASE("exchange calls: alltoallv counts that disagree are a Mismatch naming both ranks",
          "[exchange][errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    Findings f;
    loom::test::run_together(
        2,
        [&](Communicator& comm) {
          const int r = comm.rank();
          std::vector<std::size_t> sc{2, 2}, rc{2, 2};
          if (r == 0) rc[1] = 3;
          if (r == 1) sc[0] = 4;
          std::vector<double> send(8, 1.0), recv(8, 0.0);
          std::optional<Error> e;
          try {
            comm.alltoallv(send.data(), sc, recv.data(), rc, DataType::Float64).wait();
          } catch (const Error& err) {
            e = err;
          }
          if (r == 1 && !e) {  // its receive matched: the failure arrives as rank 0's report
            for (int i = 0; i < 400 && !e; ++i) {
              e = comm.async_error();
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          }
          const std::string msg = e ? e->what() : "no error";
          if (!e || e->code() != ErrorCode::Mismatch || msg.find("rank 0") == std::string::npos ||
              msg.find("rank 1") == std::string::npos)
            f.add(transports + ", rank " + std::to_string(r) + ": " + msg);
        },
        {{"LOOM_TRANSPORTS", transports}, {"LOOM_TIMEOUT", "30s"}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}
