// all-to-all(v), gather and scatter plans over the plan simulator: every byte lands where the
// layout says for 1..9 ranks, uneven and zero block sizes, displacements with gaps, in and out of
// place; gaps are never written; the plans are free of data hazards; counts that disagree
// between two ranks fail as a size mismatch instead of hanging.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "algorithms/exchange.hpp"
#include "plan_sim.hpp"

using namespace loom;

namespace {

constexpr std::uint8_t kGuard = 0x5a;

// The byte that rank `src` puts at position `i` of its block for rank `dst`.
std::uint8_t payload(int src, int dst, std::size_t i) {
  return static_cast<std::uint8_t>(src * 37 + dst * 11 + static_cast<int>(i) * 3 + 1);
}

// Uneven, zero for some pairs; symmetric (c(r,p) == c(p,r)) when asked, as in place needs.
std::size_t block(int r, int p, bool symmetric) {
  if (symmetric && r > p) return block(p, r, true);
  return static_cast<std::size_t>((r * 7 + p * 3) % 5) * 3;
}

// Blocks in reverse rank order with a one-byte gap after each (displacements are honoured).
void place(std::vector<std::size_t>& offsets, const std::vector<std::size_t>& bytes) {
  offsets.assign(bytes.size(), 0);
  std::size_t off = 0;
  for (std::size_t p = bytes.size(); p-- > 0;) {
    offsets[p] = off;
    off += bytes[p] + 1;
  }
}

std::size_t extent(const std::vector<std::size_t>& offsets, const std::vector<std::size_t>& bytes) {
  std::size_t end = 0;
  for (std::size_t p = 0; p < bytes.size(); ++p) end = std::max(end, offsets[p] + bytes[p] + 1);
  return end;
}

algo::ExchangeLayout layout_of(int r, int n, bool in_place) {
  algo::ExchangeLayout l;
  l.rank = r;
  l.nranks = n;
  l.in_place = in_place;
  for (int p = 0; p < n; ++p) {
    l.send_bytes.push_back(block(r, p, in_place));
    l.recv_bytes.push_back(block(p, r, in_place));
  }
  place(l.send_offsets, l.send_bytes);
  place(l.recv_offsets, l.recv_bytes);
  return l;
}

// Runs every rank's plan; returns the simulator's verdict and leaves the ranks' memory.
std::string run_alltoallv(int n, bool in_place, std::vector<test::SimRank>& ranks,
                          std::vector<algo::ExchangeLayout>& layouts) {
  ranks.assign(static_cast<std::size_t>(n), {});
  layouts.clear();
  for (int r = 0; r < n; ++r) {
    auto& rk = ranks[static_cast<std::size_t>(r)];
    layouts.push_back(layout_of(r, n, in_place));
    const auto& l = layouts.back();
    rk.plan = algo::pairwise_alltoall(l);
    rk.send_bytes = extent(l.send_offsets, l.send_bytes);
    rk.recv_bytes = extent(l.recv_offsets, l.recv_bytes);
    rk.recv_off = in_place ? 0 : rk.send_bytes;
    rk.mem.assign(rk.send_bytes + rk.recv_bytes, kGuard);
    for (int p = 0; p < n; ++p)
      for (std::size_t i = 0; i < l.send_bytes[static_cast<std::size_t>(p)]; ++i)
        rk.mem[l.send_offsets[static_cast<std::size_t>(p)] + i] = payload(r, p, i);
    const std::string hz = test::find_hazard(rk.plan, rk.send_off, rk.recv_off);
    if (!hz.empty()) return "rank " + std::to_string(r) + ": " + hz;
  }
  return test::simulate(ranks, DataType::Uint8, RedOp::Sum);
}

}  // namespace

TEST_CASE("exchange: all-to-all-v puts every block where the layout says, 1..9 ranks",
          "[exchange]") {
  for (bool in_place : {false, true})
    for (int n = 1; n <= 9; ++n) {
      std::vector<test::SimRank> ranks;
      std::vector<algo::ExchangeLayout> layouts;
      const std::string err = run_alltoallv(n, in_place, ranks, layouts);
      INFO("n " << n << (in_place ? " in place" : " out of place") << ": " << err);
      REQUIRE(err.empty());
      std::size_t wrong = 0;
      for (int r = 0; r < n; ++r) {
        const auto& rk = ranks[static_cast<std::size_t>(r)];
        const auto& l = layouts[static_cast<std::size_t>(r)];
        std::vector<bool> written(rk.recv_bytes, false);
        for (int p = 0; p < n; ++p) {
          const std::size_t off = l.recv_offsets[static_cast<std::size_t>(p)];
          for (std::size_t i = 0; i < l.recv_bytes[static_cast<std::size_t>(p)]; ++i) {
            wrong += rk.mem[rk.recv_off + off + i] != payload(p, r, i);
            written[off + i] = true;
          }
        }
        for (std::size_t b = 0; b < rk.recv_bytes; ++b)
          wrong += !written[b] && rk.mem[rk.recv_off + b] != kGuard;  // gaps untouched
      }
      CHECK(wrong == 0);
    }
}

TEST_CASE("exchange: uniform all-to-all, one message per pair, zero-byte blocks included",
          "[exchange]") {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{5}})
    for (int n : {1, 2, 3, 4, 7}) {
      std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        auto& rk = ranks[static_cast<std::size_t>(r)];
        rk.plan = algo::pairwise_alltoall(algo::uniform_layout(r, n, bytes, false));
        rk.send_bytes = rk.recv_bytes = bytes * static_cast<std::size_t>(n);
        rk.recv_off = rk.send_bytes;
        rk.mem.assign(2 * rk.send_bytes + 1, 0);  // never empty: data() is a real address
        for (int p = 0; p < n; ++p)
          for (std::size_t i = 0; i < bytes; ++i)
            rk.mem[static_cast<std::size_t>(p) * bytes + i] = payload(r, p, i);
        // Round k: send to r+k, receive from r-k (one partner per direction at a time), one
        // message per pair also when the blocks are empty.
        int sends = 0, recvs = 0;
        for (const auto& s : rk.plan.steps) {
          if (s.kind == algo::StepKind::Send) CHECK(s.peer == (r + ++sends) % n);
          if (s.kind == algo::StepKind::Recv) CHECK(s.peer == (r - ++recvs + n) % n);
        }
        CHECK(sends == n - 1);
        CHECK(recvs == n - 1);
      }
      const std::string err = test::simulate(ranks, DataType::Uint8, RedOp::Sum);
      INFO("n " << n << " block " << bytes << ": " << err);
      REQUIRE(err.empty());
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p)
          for (std::size_t i = 0; i < bytes; ++i)
            CHECK(ranks[static_cast<std::size_t>(r)]
                      .mem[ranks[0].send_bytes + static_cast<std::size_t>(p) * bytes + i] ==
                  payload(p, r, i));
    }
}

TEST_CASE("exchange: counts that disagree between two ranks are a size mismatch, not a hang",
          "[exchange]") {
  const int n = 3;
  std::vector<test::SimRank> ranks(n);
  for (int r = 0; r < n; ++r) {
    auto l = algo::uniform_layout(r, n, 4, false);
    if (r == 2) l.recv_bytes[1] = 6;  // rank 2 expects 6 bytes from rank 1, which sends 4
    place(l.recv_offsets, l.recv_bytes);
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = algo::pairwise_alltoall(l);
    rk.send_bytes = rk.recv_bytes = 32;
    rk.recv_off = 32;
    rk.mem.assign(64, 0);
  }
  CHECK_THAT(test::simulate(ranks, DataType::Uint8, RedOp::Sum),
             Catch::Matchers::Contains("size mismatch at rank 2 from 1"));
}

TEST_CASE("exchange: gather and scatter over every root, in and out of place", "[exchange]") {
  for (bool in_place : {false, true})
    for (int n : {1, 2, 3, 5, 8})
      for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{13}})
        for (int root = 0; root < n; ++root) {
          const std::size_t all = bytes * static_cast<std::size_t>(n);
          // gather: send block of `bytes`, root's recv of n blocks
          std::vector<test::SimRank> g(static_cast<std::size_t>(n));
          for (int r = 0; r < n; ++r) {
            auto& rk = g[static_cast<std::size_t>(r)];
            const bool ip = in_place && r == root;
            rk.plan = algo::flat_gather(r, n, root, bytes, ip);
            rk.send_bytes = bytes;
            rk.recv_bytes = all;
            rk.recv_off = ip ? 0 : bytes;
            rk.send_off = ip ? static_cast<std::size_t>(r) * bytes : 0;
            rk.mem.assign(bytes + all + 1, kGuard);
            for (std::size_t i = 0; i < bytes; ++i) rk.mem[rk.send_off + i] = payload(r, root, i);
            REQUIRE(test::find_hazard(rk.plan, rk.send_off, rk.recv_off).empty());
          }
          std::string err = test::simulate(g, DataType::Uint8, RedOp::Sum);
          INFO("gather n " << n << " root " << root << " bytes " << bytes << ": " << err);
          REQUIRE(err.empty());
          const auto& gr = g[static_cast<std::size_t>(root)];
          for (int p = 0; p < n; ++p)
            for (std::size_t i = 0; i < bytes; ++i)
              CHECK(gr.mem[gr.recv_off + static_cast<std::size_t>(p) * bytes + i] ==
                    payload(p, root, i));
          // scatter: root's send of n blocks, every rank's recv block of `bytes`
          std::vector<test::SimRank> s(static_cast<std::size_t>(n));
          for (int r = 0; r < n; ++r) {
            auto& rk = s[static_cast<std::size_t>(r)];
            const bool ip = in_place && r == root;
            rk.plan = algo::flat_scatter(r, n, root, bytes, ip);
            rk.send_bytes = all;
            rk.recv_bytes = bytes;
            rk.recv_off = ip ? static_cast<std::size_t>(r) * bytes : all;
            rk.mem.assign(all + bytes + 1, kGuard);
            if (r == root)
              for (int p = 0; p < n; ++p)
                for (std::size_t i = 0; i < bytes; ++i)
                  rk.mem[static_cast<std::size_t>(p) * bytes + i] = payload(root, p, i);
            REQUIRE(test::find_hazard(rk.plan, rk.send_off, rk.recv_off).empty());
          }
          err = test::simulate(s, DataType::Uint8, RedOp::Sum);
          INFO("scatter n " << n << " root " << root << " bytes " << bytes << ": " << err);
          REQUIRE(err.empty());
          for (int r = 0; r < n; ++r) {
            const auto& rk = s[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < bytes; ++i)
              CHECK(rk.mem[rk.recv_off + i] == payload(root, r, i));
          }
        }
}
