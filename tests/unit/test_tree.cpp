// Double binary tree: shape properties for every n in 1..1024, and the allreduce, broadcast and
// reduce plans (flat and per host) run over the in-memory plan simulator with exact checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "algorithms/tree.hpp"
#include "plan_sim.hpp"

using namespace loom;
using loom::algo::Tree;
using loom::algo::TreeParams;

namespace {

// "" when `t` is a tree over 0..n-1 (every rank reaches the root, parent/children agree).
std::string tree_problem(const Tree& t, int n) {
  if (t.size() != n) return "wrong size";
  if (t.parent[static_cast<std::size_t>(t.root)] != -1) return "root has a parent";
  for (int r = 0; r < n; ++r) {
    int steps = 0;
    for (int x = r; x != t.root; x = t.parent[static_cast<std::size_t>(x)])
      if (x < 0 || ++steps > n) return "rank " + std::to_string(r) + " does not reach the root";
    for (int c : t.children[static_cast<std::size_t>(r)])
      if (t.parent[static_cast<std::size_t>(c)] != r) return "child/parent mismatch";
  }
  return "";
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

TEST_CASE("tree: double binary tree properties for every n in 1..1024", "[tree]") {
  for (int n = 1; n <= 1024; ++n) {
    INFO("n " << n);
    auto dt = algo::double_binary_tree(n);
    for (const Tree& t : dt.trees) {
      REQUIRE(tree_problem(t, n).empty());
      REQUIRE(t.depth() <= ceil_log2(n) + 1);
      for (int r = 0; r < n; ++r) REQUIRE(t.children[static_cast<std::size_t>(r)].size() <= 2);
    }
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      REQUIRE(!(dt.trees[0].interior(r) && dt.trees[1].interior(r)));
    }
    // Re-rooting (broadcast and reduce) keeps a valid tree.
    int root = (n * 7 + 3) % n;
    for (const Tree& t : dt.trees) REQUIRE(tree_problem(t.rerooted(root), n).empty());
  }
}

TEST_CASE("tree: the two trees split the data into halves", "[tree]") {
  // Each element travels up and down exactly one tree: over all ranks, allreduce sends
  // 2 (n - 1) x count elements (each tree alone would send that for its half only).
  for (int n : {2, 3, 4, 7, 16, 33})
    for (std::size_t count : {1, 2, 7, 1000, 1001})
      for (std::size_t chunk : {4, 64, 4096}) {
        INFO("n " << n << " count " << count << " chunk " << chunk);
        std::size_t first_half = algo::split_block(count, 2, 0).count;
        std::size_t second_half = algo::split_block(count, 2, 1).count;
        REQUIRE(first_half + second_half == count);
        REQUIRE(first_half - second_half <= 1);
        std::size_t sent = 0;
        for (int r = 0; r < n; ++r) {
          TreeParams p;
          p.rank = r;
          p.nranks = n;
          p.count = count;
          p.elem_size = 4;
          p.chunk_bytes = chunk;
          for (const auto& st : algo::tree_allreduce(p).steps)
            if (st.kind == algo::StepKind::Send) sent += st.src.bytes;
        }
        REQUIRE(sent == 2 * static_cast<std::size_t>(n - 1) * count * 4);
      }
}

TEST_CASE("tree: per-host trees chain each host below its leader", "[tree]") {
  for (int nhosts : {1, 2, 3, 5, 8})
    for (int per : {1, 2, 3, 4}) {
      std::vector<std::vector<int>> hosts(static_cast<std::size_t>(nhosts));
      int n = nhosts * per;
      for (int r = 0; r < n; ++r) hosts[static_cast<std::size_t>(r % nhosts)].push_back(r);
      auto dt = algo::host_double_tree(hosts);
      INFO("hosts " << nhosts << " per host " << per);
      for (const Tree& t : dt.trees) {
        REQUIRE(tree_problem(t, n).empty());
        // Only leaders talk across hosts.
        for (int r = 0; r < n; ++r) {
          int par = t.parent[static_cast<std::size_t>(r)];
          if (par >= 0 && par % nhosts != r % nhosts) {
            const auto& h = hosts[static_cast<std::size_t>(r % nhosts)];
            REQUIRE((r == h.front() || r == h.back()));
          }
        }
      }
    }
}

namespace {

enum class Coll { AllReduce, Broadcast, Reduce };

std::int64_t value(int r, std::size_t i) {
  return static_cast<std::int64_t>(i) * 10'000'000 + r + 1;
}

struct Case {
  Coll coll = Coll::AllReduce;
  int n = 1;
  std::size_t count = 0;
  bool in_place = false;
  int root = 0;
  std::size_t chunk_bytes = 64;
  std::size_t depth = 2;
  int nhosts = 1;
};

void run_case(const Case& c) {
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(c.n));
  std::vector<std::vector<int>> hosts(static_cast<std::size_t>(c.nhosts));
  for (int r = 0; r < c.n; ++r) hosts[static_cast<std::size_t>(r % c.nhosts)].push_back(r);
  const std::size_t bytes = c.count * 8;
  for (int r = 0; r < c.n; ++r) {
    auto p = loom::test::plan_params<TreeParams>(r, c.n, c.count, 8);
    if (c.nhosts > 1) p.hosts = hosts;
    p.chunk_bytes = c.chunk_bytes;
    p.depth = c.depth;
    p.in_place = c.in_place;
    p.root = c.root;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = c.coll == Coll::AllReduce   ? algo::tree_allreduce(p)
              : c.coll == Coll::Broadcast ? algo::tree_broadcast(p)
                                          : algo::tree_reduce(p);
    rk.send_bytes = rk.recv_bytes = bytes;
    rk.send_off = 0;
    rk.recv_off = c.in_place ? 0 : bytes;
    rk.mem.assign(2 * bytes + 8, 0x5a);
    for (std::size_t i = 0; i < c.count; ++i) {
      std::int64_t v = c.coll == Coll::Broadcast && r != c.root ? -1 : value(r, i);
      std::memcpy(rk.mem.data() + i * 8, &v, 8);
    }
    if (rk.plan.steps.size() < 1200) {
      std::string hz = test::find_hazard(rk.plan, rk.send_off, rk.recv_off);
      INFO("rank " << r << " " << hz);
      REQUIRE(hz.empty());
    }
  }
  REQUIRE(test::simulate(ranks, DataType::Int64, RedOp::Sum).empty());
  for (int r = 0; r < c.n; ++r) {
    if (c.coll == Coll::Reduce && r != c.root) continue;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < c.count; ++i) {
      std::int64_t want = 0;
      if (c.coll == Coll::Broadcast)
        want = value(c.root, i);
      else
        for (int q = 0; q < c.n; ++q) want += value(q, i);
      std::int64_t got;
      std::memcpy(&got, rk.mem.data() + rk.recv_off + i * 8, 8);
      INFO("rank " << r << " element " << i);
      REQUIRE(got == want);
    }
  }
}

}  // namespace

TEST_CASE("tree: allreduce, broadcast and reduce are exact over the plan simulator", "[tree]") {
  for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 11, 16})
      for (std::size_t count : {0, 1, 2, 5, 13, 64, 101})
        for (bool ip : {false, true}) {
          Case c{coll, n, count, ip, static_cast<int>(count % static_cast<std::size_t>(n))};
          INFO("coll " << int(coll) << " n " << n << " count " << count << " in_place " << ip);
          run_case(c);
        }
}

TEST_CASE("tree: chunking, depth and per-host trees do not change results", "[tree]") {
  for (std::size_t chunk : {8, 24, 1000})
    for (std::size_t depth : {1, 3})
      for (int nhosts : {1, 2, 3})
        for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
          for (bool ip : {false, true}) {
            Case c{coll, 6, 37, ip, 4, chunk, depth, nhosts};
            INFO("chunk " << chunk << " depth " << depth << " hosts " << nhosts << " coll "
                          << int(coll) << " in_place " << ip);
            run_case(c);
          }
}

TEST_CASE("tree: large trees complete without deadlock", "[tree]") {
  for (int n : {33, 64, 129, 256})
    for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce}) {
      Case c{coll, n, 40, false, n / 3, 16, 2, n % 2 == 0 ? 4 : 1};
      INFO("n " << n << " coll " << int(coll));
      run_case(c);
    }
}
