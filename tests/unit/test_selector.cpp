// The selector: LOOM_ALGO parsing, tuning constants, the cost model's choices, and loom-sim's
// modelled clusters.
#include <array>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <string>

#include "comm_harness.hpp"
#include "core/planner.hpp"
#include "selector/catalog.hpp"
#include "selector/selector.hpp"
#include "tools/loom_sim/cluster.hpp"
#include "tools/loom_sim/replay.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/registry.hpp"
#include "transports/shm/shm_policy.hpp"

using namespace loom;
using namespace loom::select;
using namespace loom::sim;

TEST_CASE("selector: LOOM_ALGO forces algorithms, also per collective", "[selector]") {
  auto all_auto = Policy::parse("auto");
  REQUIRE(all_auto.is_ok());
  for (auto f : all_auto->forced) REQUIRE(!f);

  auto tree = Policy::parse("tree");
  REQUIRE(tree.is_ok());
  REQUIRE(tree->for_coll(Coll::AllReduce) == Algo::Tree);
  REQUIRE(tree->for_coll(Coll::Broadcast) == Algo::Tree);
  REQUIRE(tree->for_coll(Coll::Reduce) == Algo::Tree);
  REQUIRE(!tree->for_coll(Coll::AllGather));  // no tree schedule: stays auto (ring)

  auto mixed = Policy::parse("allreduce:tree, broadcast:ring,reduce_scatter:auto");
  REQUIRE(mixed.is_ok());
  REQUIRE(mixed->for_coll(Coll::AllReduce) == Algo::Tree);
  REQUIRE(mixed->for_coll(Coll::Broadcast) == Algo::Ring);
  REQUIRE(!mixed->for_coll(Coll::Reduce));
  REQUIRE(!mixed->for_coll(Coll::ReduceScatter));

  auto ring_then_tree = Policy::parse("ring,allreduce:tree");
  REQUIRE(ring_then_tree.is_ok());
  REQUIRE(ring_then_tree->for_coll(Coll::AllReduce) == Algo::Tree);
  REQUIRE(ring_then_tree->for_coll(Coll::Reduce) == Algo::Ring);

  auto rd = Policy::parse("rd");
  REQUIRE(rd.is_ok());
  REQUIRE(rd->for_coll(Coll::AllReduce) == Algo::Rd);
  REQUIRE(!rd->for_coll(Coll::Broadcast));  // allreduce only
  auto rd_long = Policy::parse("allreduce:recursive_doubling");
  REQUIRE(rd_long.is_ok());
  REQUIRE(rd_long->for_coll(Coll::AllReduce) == Algo::Rd);

  auto no_hier = Policy::parse("^hier, ^rd");
  REQUIRE(no_hier.is_ok());
  REQUIRE(no_hier->excluded[static_cast<std::size_t>(Algo::Hier)]);
  REQUIRE(no_hier->excluded[static_cast<std::size_t>(Algo::Rd)]);
  REQUIRE(!no_hier->excluded[static_cast<std::size_t>(Algo::Tree)]);
  REQUIRE(!no_hier->for_coll(Coll::AllReduce));

  for (const char* bad : {"bogus", "allgather:tree", "scatter:ring", "allreduce:", "allreduce:x",
                          "broadcast:rd", "^bogus", "^deterministic", "allreduce:bruck"}) {
    INFO(bad);
    auto r = Policy::parse(bad);
    REQUIRE(!r.is_ok());
    REQUIRE(r.status().message().find("LOOM_ALGO") != std::string::npos);
  }
}

TEST_CASE("selector: tuning constants parse, print and come from the registry", "[selector]") {
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=3.5,inter_gbps=12.5,oversub_alpha_us=7,oversub_gbps=13,"
                  "oversub_turn_us=4.5")
              .is_ok());
  REQUIRE(t.intra.alpha_us == 3.5);
  REQUIRE(t.inter.gbps == 12.5);
  REQUIRE(t.shared.gbps == 13);
  REQUIRE(t.shared.turn_us == 4.5);
  Tuning u;
  REQUIRE(u.apply(t.to_string()).is_ok());
  REQUIRE(u.to_string() == t.to_string());
  REQUIRE(!t.apply("nosuch=1").is_ok());
  REQUIRE(!t.apply("intra_gbps=fast").is_ok());
  REQUIRE(!t.apply("intra_gbps=0").is_ok());
  REQUIRE(!t.apply("intra_alpha_us").is_ok());

  auto cfg = config::Config::load(
      {{"LOOM_TUNE_INTER_ALPHA_US", "55"}, {"LOOM_TUNING", "intra_gbps=9,reduce_gbps=11"}});
  REQUIRE(cfg.is_ok());
  auto from = tuning_from(*cfg);
  REQUIRE(from.is_ok());
  REQUIRE(from->inter.alpha_us == 55);
  REQUIRE(from->intra.gbps == 9);
  REQUIRE(from->reduce_gbps == 11);
  auto bad = config::Config::load({{"LOOM_TUNING", "intra_gbps=-1"}});
  REQUIRE(bad.is_ok());
  REQUIRE(!tuning_from(*bad).is_ok());
}

TEST_CASE("selector: small allreduces take recursive doubling (else the tree), large ones the ring",
          "[selector]") {
  Shape s;
  s.nranks = 8;
  s.per_host = 8;
  Tuning t;
  Pipeline p;
  auto table = CostTable::build(s, t, p);
  auto tiny = choose(Coll::AllReduce, 8, table, std::nullopt);
  REQUIRE(tiny.algo == Algo::Rd);  // 3 messages on the critical path, against 6 and 14
  REQUIRE(tiny.us_of(Algo::Rd) < tiny.us_of(Algo::Tree));
  REQUIRE(tiny.pick_us() == tiny.us_of(Algo::Rd));
  REQUIRE(tiny.describe(Coll::AllReduce, 8, s).find("-> rd (auto)") != std::string::npos);
  auto above_cap = choose(Coll::AllReduce, std::size_t{512} << 10, table, std::nullopt);
  REQUIRE(above_cap.algo != Algo::Rd);
  REQUIRE(above_cap.us_of(Algo::Rd) >= 1e29);  // beyond rd_max_bytes (256 KiB): not a candidate
  auto forced_rd = choose(Coll::AllReduce, std::size_t{512} << 10, table, Algo::Rd);
  REQUIRE(forced_rd.algo == Algo::Rd);  // forcing ignores the size cap
  auto rd_for_bcast = choose(Coll::Broadcast, 8, table, Algo::Rd);
  REQUIRE(rd_for_bcast.algo != Algo::Rd);
  REQUIRE(rd_for_bcast.us_of(Algo::Rd) < 0);

  t.rd_max_bytes = 0;  // recursive doubling off: the tree takes the small sizes
  table = CostTable::build(s, t, p);
  auto small = choose(Coll::AllReduce, 8, table, std::nullopt);
  REQUIRE(small.algo == Algo::Tree);
  REQUIRE(small.us_of(Algo::Tree) < small.us_of(Algo::Ring));
  REQUIRE(!small.forced);
  auto large = choose(Coll::AllReduce, std::size_t{64} << 20, table, std::nullopt);
  REQUIRE(large.algo == Algo::Ring);
  // Forcing wins over the model; a forced tree for allgather falls back to the model (Bruck's
  // 3 rounds against the ring's 7 at 8 B).
  auto forced = choose(Coll::AllReduce, 8, table, Algo::Ring);
  REQUIRE(forced.algo == Algo::Ring);
  REQUIRE(forced.forced);
  auto ag = choose(Coll::AllGather, 8, table, Algo::Tree);
  REQUIRE(ag.algo == Algo::Bruck);
  REQUIRE(!ag.forced);
  REQUIRE(ag.us_of(Algo::Tree) < 0);
  REQUIRE(small.describe(Coll::AllReduce, 8, s).find("-> tree (auto)") != std::string::npos);
}

TEST_CASE("selector: predictions grow with size and rank count on every preset", "[selector]") {
  for (auto name : preset_names()) {
    auto c = preset(name, Tuning{}, 2);
    REQUIRE(c.is_ok());
    for (Coll coll :
         {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
      for (Algo a : {Algo::Ring, Algo::Tree}) {
        if (!select::supports(coll, a)) continue;
        INFO(name << " " << to_string(coll) << " " << to_string(a));
        double prev = 0;
        for (std::size_t bytes = 8; bytes <= (std::size_t{1} << 30); bytes *= 4) {
          double us = predict_us(coll, a, bytes, shape_of(*c, 64), c->tuning, Pipeline{});
          REQUIRE(us >= prev);
          prev = us;
        }
        REQUIRE(predict_us(coll, a, 1 << 20, shape_of(*c, 4096), c->tuning, Pipeline{}) >
                predict_us(coll, a, 1 << 20, shape_of(*c, 16), c->tuning, Pipeline{}));
      }
  }
  REQUIRE(!preset("nosuch", Tuning{}, 2).is_ok());
}

TEST_CASE("selector: loom-sim shapes use the trees loom builds", "[selector]") {
  auto c = preset("25gbe", Tuning{}, 0);
  REQUIRE(c.is_ok());
  Shape s = shape_of(*c, 4096);
  REQUIRE(s.nhosts == 512);
  REQUIRE(s.per_host == 8);
  REQUIRE(s.tree_depth == 7 + 9);  // a chain of 8 below trees over 512 leaders (depth 9)
  Shape flat = shape_of(*c, 5);    // fewer ranks than a host holds: one host, flat trees
  REQUIRE(flat.nhosts == 1);
  REQUIRE(flat.tree_depth == flat_tree_depth(5));
  // An oversubscribed host (8 ranks, 2 cores) predicts slower collectives than 2 cores can run
  // without sharing.
  auto local = preset("local", Tuning{}, 2);
  REQUIRE(local.is_ok());
  Tuning t = local->tuning;
  REQUIRE(t.apply("oversub_alpha_us=20").is_ok());
  double eight = predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, shape_of(*local, 8), t, {});
  local->cores = 0;
  double eight_free = predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, shape_of(*local, 8), t, {});
  REQUIRE(eight > eight_free);
}

TEST_CASE("selector: a bad LOOM_ALGO fails communicator creation", "[selector]") {
  REQUIRE_THROWS_AS(test::run_ranks(2, [](Communicator&) {}, {{"LOOM_ALGO", "allgather:tree"}}),
                    std::runtime_error);
}

TEST_CASE("selector: cache bandwidth applies up to cache_bytes, oversubscription adds latency",
          "[selector]") {
  Shape s;
  s.nranks = 4;
  s.per_host = 4;
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=1,reduce_gbps=1000").is_ok());
  const double slow = predict_us(Coll::AllGather, Algo::Ring, 1 << 20, s, t, {});
  REQUIRE(t.apply("intra_cache_gbps=4,cache_bytes=1048576").is_ok());
  const double cached = predict_us(Coll::AllGather, Algo::Ring, 1 << 20, s, t, {});
  REQUIRE(cached == Approx(slow / 4));
  const double beyond = predict_us(Coll::AllGather, Algo::Ring, 2 << 20, s, t, {});
  REQUIRE(beyond == Approx(2 * slow));  // past the cache: memory bandwidth again
  REQUIRE(t.apply("oversub_alpha_us=25").is_ok());
  const double fits = predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {});
  s.cores = 2;  // 4 ranks on 2 CPUs: 3 messages x 25 us x (ceil(4/2) - 1) more
  REQUIRE(predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {}) == Approx(fits + 75).margin(0.1));
  s.nranks = s.per_host = 8;  // 8 ranks: 7 messages x 25 us x (ceil(8/2) - 1)
  const double eight = predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {});
  s.cores = 8;
  REQUIRE(eight == Approx(predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {}) + 525).margin(0.1));
  s.nranks = s.per_host = 5;  // 5 ranks on 2 CPUs: the busiest runs 3, 2 more than one
  const double five_free = predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {});
  s.cores = 2;
  REQUIRE(predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {}) ==
          Approx(five_free + 4 * 25 * 2).margin(0.1));
}

TEST_CASE("selector: on an oversubscribed host, waits for descheduled ranks add to the copies",
          "[selector]") {
  Shape s;
  s.nranks = s.per_host = 4;
  s.cores = 2;
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=1,reduce_gbps=1000,oversub_alpha_us=25").is_ok());
  // Allgather: 3 messages, each waiting 25 x (ceil(4/2) - 1) = 25 us; 3/4 of the buffer per link at
  // 1 GB/s over a CPU share of 1/2. The CPUs run the other ranks meanwhile, not our copies.
  const double data_1m = 0.75 * (1 << 20) * 1e-3 * 2;
  CHECK(predict_us(Coll::AllGather, Algo::Ring, 1 << 20, s, t, {}) == Approx(3 + 75 + data_1m));
  const double data_8k = 0.75 * 8192 * 1e-3 * 2;
  CHECK(predict_us(Coll::AllGather, Algo::Ring, 8192, s, t, {}) == Approx(3 + 75 + data_8k));
  s.cores = 4;  // no oversubscription: no waits, the full bandwidth
  CHECK(predict_us(Coll::AllGather, Algo::Ring, 1 << 20, s, t, {}) == Approx(3 + data_1m / 2));
}

TEST_CASE("selector: bandwidth falls log-linearly from the cache plateau to memory bandwidth",
          "[selector]") {
  Shape s;
  s.nranks = 4;
  s.per_host = 4;
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=1,intra_cache_gbps=4,cache_bytes=1048576,"
                  "dram_bytes=16777216")
              .is_ok());
  auto gbps_at = [&](double bytes) {  // allgather moves 3/4 of the buffer through each link
    return 0.75 * bytes * 1e-3 /
           predict_us(Coll::AllGather, Algo::Ring, static_cast<std::size_t>(bytes), s, t, {});
  };
  REQUIRE(gbps_at(1 << 20) == Approx(4));
  REQUIRE(gbps_at(4 << 20) == Approx(2.5));   // halfway in log2 between 1 MiB and 16 MiB
  REQUIRE(gbps_at(8 << 20) == Approx(1.75));  // three quarters
  REQUIRE(gbps_at(16 << 20) == Approx(1));
  REQUIRE(gbps_at(64 << 20) == Approx(1));
  // More ranks than CPUs: no cache plateau, memory bandwidth divided by each rank's CPU share.
  s.cores = 2;
  REQUIRE(gbps_at(1 << 20) == Approx(0.5));
  REQUIRE(gbps_at(64 << 20) == Approx(0.5));
  s.cores = 4;
  REQUIRE(gbps_at(1 << 20) == Approx(4));
}

namespace {
// One host of `ranks` ranks on `cores` CPUs.
Shape one_host(int ranks, int cores) {
  Shape s;
  s.nranks = s.per_host = ranks;
  s.cores = cores;
  return s;
}
}  // namespace

TEST_CASE("selector: an oversubscribed host shares oversub_gbps between its ranks", "[selector]") {
  Shape s = one_host(4, 2);
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=3,intra_cache_gbps=9,reduce_gbps=1000,"
                  "oversub_alpha_us=0")
              .is_ok());
  CHECK(intra_link_gbps(s, t, 1 << 20) == Approx(1.5));  // 0: the CPU share of intra_gbps
  // 4 ranks x (input + output) of 64 KiB fit in one CPU's half of the 1 MiB cache: its rate, by
  // CPU share.
  CHECK(intra_link_gbps(s, t, 64 << 10) == Approx(4.5));
  CHECK(intra_link_gbps(s, t, 256 << 10) == Approx(1.5));  // 2 MiB in all: no longer
  // The host's buffers must fit in one CPU's share of the cache (1 MiB / 2 CPUs): 3 ranks'
  // 64 KiB (384 KiB in all) do, their 128 KiB (768 KiB) do not.
  CHECK(intra_link_gbps(one_host(3, 2), t, 64 << 10) == Approx(6));
  CHECK(intra_link_gbps(one_host(3, 2), t, 128 << 10) == Approx(2));
  // With a CPU's private cache given (here 1 MiB), it is the limit.
  REQUIRE(t.apply("core_cache_bytes=1048576").is_ok());
  CHECK(intra_link_gbps(one_host(3, 2), t, 128 << 10) == Approx(6));
  CHECK(intra_link_gbps(one_host(3, 2), t, 256 << 10) == Approx(2));
  REQUIRE(t.apply("core_cache_bytes=0").is_ok());
  REQUIRE(t.apply("oversub_gbps=10").is_ok());
  CHECK(intra_link_gbps(s, t, 1 << 20) == Approx(2.5));  // 10 GB/s over 4 ranks
  CHECK(intra_link_gbps(s, t, 64 << 20) == Approx(2.5));
  // Allgather moves 3/4 of the buffer through each link at that rate.
  CHECK(predict_us(Coll::AllGather, Algo::Ring, 1 << 20, s, t, {}) ==
        Approx(0.75 * (1 << 20) * 1e-3 / 2.5));
  s.nranks = s.per_host = 8;
  CHECK(intra_link_gbps(s, t, 1 << 20) == Approx(1.25));
  s.cores = 8;  // not oversubscribed: the cache plateau, oversub_gbps plays no part
  CHECK(intra_link_gbps(s, t, 1 << 20) == Approx(9));
}

TEST_CASE("selector: a calibrated curve replaces the cache plateau and the memory rate",
          "[selector]") {
  Curve c;
  REQUIRE(c.parse("1048576:8/4194304:2/16777216:1").is_ok());
  CHECK(c.at(1024) == Approx(8));     // flat below the first point
  CHECK(c.at(2097152) == Approx(5));  // halfway between 1 and 4 MiB in log2
  CHECK(c.at(8388608) == Approx(1.5));
  CHECK(c.at(double{1} * (1 << 30)) == Approx(1));  // and beyond the last
  CHECK(c.to_string() == "1048576:8/4194304:2/16777216:1");
  CHECK(c.linear_at(2621440) == Approx(5));     // a time's: linear in bytes (1 MiB + half of 3 MiB)
  CHECK(c.linear_at(23068672) == Approx(0.5));  // the last slope beyond: 1 - 6 MiB / 12 MiB
  for (const char* bad : {"1048576", "1048576:x", "4194304:2/1048576:8", "1048576:0", "-1:2"})
    CHECK(!Curve{}.parse(bad).is_ok());

  Tuning t;
  REQUIRE(t.apply("intra_gbps=1,intra_cache_gbps=9,cache_bytes=1048576,dram_bytes=16777216,"
                  "intra_eager_gbps=3,oversub_gbps=4,oversub_alpha_us=0")
              .is_ok());
  const Shape two = one_host(2, 2);
  CHECK(intra_link_gbps(two, t, 4194304) == Approx(5));  // the knees: 9 falling to 1
  REQUIRE(t.apply("intra_curve=1048576:8/4194304:2/16777216:1").is_ok());
  CHECK(intra_link_gbps(two, t, 4194304) == Approx(2));  // the measured curve
  CHECK(intra_link_gbps(two, t, 65536, 16384, 0, Path::Eager) ==
        Approx(3));  // eager: at most the eager rate
  CHECK(intra_link_gbps(two, t, 8388608, 16384, 0, Path::Eager) == Approx(1.5));
  // The eager rate by message size; on the eager path a message of any size takes it.
  REQUIRE(t.apply("intra_eager_curve=1024:1/32768:6").is_ok());
  CHECK(intra_link_gbps(two, t, 65536, 1024, 0, Path::Eager) == Approx(1));
  CHECK(intra_link_gbps(two, t, 65536, 16384, 0, Path::Eager) == Approx(5));  // 1 + 4/5 x (6 - 1)
  CHECK(intra_link_gbps(two, t, 65536, 1 << 20) == Approx(8));  // single copy: the curve's
  CHECK(intra_link_gbps(two, t, 65536, 1 << 20, 0, Path::Eager) == Approx(6));
  REQUIRE(t.apply("intra_eager_curve=").is_ok());
  // The oversubscribed host's curve (its total rate by all its ranks' buffers) over the busiest
  // CPU's shares: 4 ranks on 2 CPUs, 4 buffers of 1 MiB, 2 MiB.
  const Shape four = one_host(4, 2);
  CHECK(intra_link_gbps(four, t, 1048576) == Approx(1));  // oversub_gbps / 4 without it
  REQUIRE(t.apply("oversub_curve=1048576:16/4194304:12/16777216:8").is_ok());
  CHECK(intra_link_gbps(four, t, 1048576) == Approx(3));
  CHECK(intra_link_gbps(four, t, 2097152) == Approx(2.5));
  // Tuning::to_string prints them, and an empty value clears a curve.
  CHECK(t.to_string().find("oversub_curve=1048576:16/4194304:12/16777216:8") != std::string::npos);
  REQUIRE(t.apply("oversub_curve=,intra_curve=").is_ok());
  CHECK(intra_link_gbps(four, t, 1048576) == Approx(1));
  CHECK(intra_link_gbps(two, t, 4194304) == Approx(5));
  CHECK(!t.apply("intra_curve=1:2:3").is_ok());
}

TEST_CASE("selector: recursive doubling's calibrated round where each rank has a CPU",
          "[selector]") {
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=1,intra_cache_gbps=0,intra_eager_gbps=0,"
                  "reduce_gbps=1,oversub_alpha_us=0,oversub_turn_us=0")
              .is_ok());
  const double S = 4096;
  // Without them: the link's alpha twice and its bandwidth per round; on one host the reduction
  // is fused into the receive (as for the ring and the tree), else it is added.
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 4096, one_host(2, 2), t, {}) == Approx(2 + S * 1e-3));
  REQUIRE(t.apply("fused_reduce=0").is_ok());
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 4096, one_host(2, 2), t, {}) ==
        Approx(2 + 2 * S * 1e-3));
  REQUIRE(t.apply("fused_reduce=1").is_ok());
  // The calibrated round: linear between the points, flat below, the last slope beyond.
  REQUIRE(t.apply("rd_round_curve=8:1/2048:2/32768:5").is_ok());
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(2, 2), t, {}) == Approx(1));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 2048, one_host(2, 2), t, {}) == Approx(2));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 17408, one_host(2, 2), t, {}) == Approx(3.5));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 63488, one_host(2, 2), t, {}) == Approx(8));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 4096, one_host(4, 4), t, {}) ==
        Approx(2 * (2 + 2048.0 / 30720 * 3)));  // two rounds
  // Not on an oversubscribed host, nor across hosts: the rules there are unchanged.
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 4096, one_host(4, 2), t, {}) ==
        Approx(2 * (2 + 2 * S * 1e-3)));  // two ranks per CPU halve the link's rate
  Shape hosts = one_host(2, 2);
  hosts.nhosts = 2;
  hosts.per_host = 1;
  REQUIRE(t.apply("inter_alpha_us=10,inter_gbps=1").is_ok());
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 4096, hosts, t, {}) == Approx(11 + 2 * S * 1e-3));
}

TEST_CASE("selector: recursive doubling on an oversubscribed host pays its CPUs' turns",
          "[selector]") {
  Shape s = one_host(8, 2);
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=1000,reduce_gbps=1e6,oversub_alpha_us=40,"
                  "oversub_turn_us=0")
              .is_ok());
  // A round is a message and the reduction step on arrival (1 us each here). Without a turn
  // cost: the per-message rule, 3 rounds x (1 + 40 x (ceil(8/2) - 1) + 1).
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, s, t, {}) == Approx(3 * 122).margin(0.01));
  REQUIRE(t.apply("oversub_turn_us=1").is_ok());
  // Each CPU runs 4 ranks' steps per round, one after another, each taking 4 turns of 1 us
  // (the 3 others yield meanwhile, with their share of the CPU): 16 turns where one rank per
  // CPU takes 1, 15 more.
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, s, t, {}) == Approx(3 * 17).margin(0.01));
  s.nranks = s.per_host = 4;  // 2 ranks per CPU: 2 rounds x (1 + 1 + (4 - 1))
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, s, t, {}) == Approx(2 * 5).margin(0.01));
  s.cores = 4;  // not oversubscribed: 2 rounds x 2 us
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, s, t, {}) == Approx(4).margin(0.01));
  // Rings still pay the per-message wake-up: 3 messages x 40 x (ceil(4/2) - 1) on 2 CPUs.
  s.cores = 2;
  CHECK(predict_us(Coll::AllGather, Algo::Ring, 8, s, t, {}) == Approx(3 + 120).margin(0.01));
}

TEST_CASE("selector: recursive doubling's folded ranks yield through the first rounds",
          "[selector]") {
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=1000,reduce_gbps=1e6,oversub_alpha_us=40,"
                  "oversub_turn_us=1")
              .is_ok());
  const double four = predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(4, 2), t, {});
  CHECK(four == Approx(2 * 5).margin(0.01));  // 2 rounds x (1 + 1 + (2^2 - 1) turns)
  // 5 ranks: the 5th folds into rank 0 and waits for its result, yielding the CPU for 20 us
  // before it blocks: the rounds (2 x (1 + 1 + (2.5^2 - 1)), 14.5 us) run 5 ranks' turns. The
  // fold and the result's return each cost a message (1 us) and the folded rank's step on one
  // of the 2 CPUs (2.5 turns over 2 CPUs).
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(5, 2), t, {}) ==
        Approx(2 * 7.25 + 2 * (1 + 1.25)).margin(0.01));
  // 7 ranks: a round with all 7 ranks' turns takes 2 + (3.5^2 - 1) = 13.25 us; after 20 us
  // the 3 folded ranks block and the rest runs at 4 ranks' 5 us a round. The folded ranks'
  // steps, 3.5 turns each, follow one another on 2 CPUs. Having blocked, they are woken for
  // their result: one oversubscribed wake-up (40 us here).
  const double seven = 20 + (2 - 20 / 13.25) * 5;
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(7, 2), t, {}) ==
        Approx(seven + 2 * (1 + 3.5 * 3 / 2) + 40).margin(0.01));
  CHECK(seven > four);
  CHECK(seven < 2 * 13.25);
  // 3 ranks: 2 in the round fit the 2 CPUs, the folded one yielding adds 1.5^2 - 1 turns.
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(3, 2), t, {}) ==
        Approx(2 + 1.25 + 2 * (1 + 0.75)).margin(0.01));
  // Without a turn cost: the per-message rule for the fold, 40 x (ceil(5/2) - 1) more per
  // message.
  REQUIRE(t.apply("oversub_turn_us=0").is_ok());
  const double rounds = 2 * (1 + 40 + 1);  // 4 ranks' rounds on 2 CPUs, per-message rule
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(5, 2), t, {}) ==
        Approx(rounds + 2 * (1 + 80)).margin(0.01));
  // Not oversubscribed: the fold is two plain messages.
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 8, one_host(5, 8), t, {}) ==
        Approx(2 * 2 + 2 * 1).margin(0.01));
}

TEST_CASE("selector: recursive doubling's scratch counts against an oversubscribed host's cache",
          "[selector]") {
  Shape s = one_host(8, 2);
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=1,intra_cache_gbps=8,reduce_gbps=1e9,"
                  "oversub_alpha_us=0,oversub_turn_us=0,oversub_gbps=4,cache_bytes=4194304,"
                  "core_cache_bytes=1048576")
              .is_ok());
  // Inputs and outputs of 8 ranks x 32 KiB (512 KiB) fit in a CPU's 1 MiB: the cache rate by
  // CPU share; with a scratch buffer per round of recursive doubling (5 x 32 KiB each, 1.25 MiB
  // in all) they do not: oversub_gbps over 8 ranks.
  CHECK(intra_link_gbps(s, t, 32 << 10) == Approx(2));
  CHECK(intra_link_gbps(s, t, 32 << 10, 32 << 10, 5 * (32 << 10)) == Approx(0.5));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 32 << 10, s, t, {}) ==
        Approx(3 * (32 << 10) * 1e-3 / 0.5));
  CHECK(predict_us(Coll::AllReduce, Algo::Rd, 16 << 10, s, t, {}) ==  // 640 KiB: cached
        Approx(3 * (16 << 10) * 1e-3 / 2));
}

TEST_CASE("selector: a tree hop on an oversubscribed host waits for a wake-up or a CPU's turns",
          "[selector]") {
  Shape s = one_host(8, 2);
  s.tree_depth = 3;
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=1e6,intra_cache_gbps=0,reduce_gbps=1e6,"
                  "oversub_alpha_us=2,oversub_turn_us=0")
              .is_ok());
  // Per-message rule: 2 x 3 hops x (1 + 2 x (ceil(8/2) - 1)).
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 8, s, t, {}) == Approx(6 * 7).margin(0.1));
  REQUIRE(t.apply("oversub_turn_us=1").is_ok());
  // A hop's senders, 2 x 7 sends over 3 levels and 2 CPUs, take their steps of 4 turns one
  // after another: 2 x 3 x (1 + (4 x 7/3 - 1)), longer.
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 8, s, t, {}) ==
        Approx(6 * (1 + 4 * 7.0 / 3 - 1)).margin(0.1));
  // 3 ranks on 2 CPUs (depth 1): 1.5^2 - 1 turns per hop (1 + 1.25) is shorter than the
  // wake-up (1 + 2 x (ceil(3/2) - 1)): that counts.
  Shape three = one_host(3, 2);
  three.tree_depth = 1;
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 8, three, t, {}) ==
        Approx(2 * (1 + 2)).margin(0.1));
  s.cores = 8;  // not oversubscribed: plain hops
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 8, s, t, {}) == Approx(6).margin(0.1));
}

TEST_CASE("selector: messages below the single-copy threshold move at the eager rate",
          "[selector]") {
  Shape s = one_host(2, 2);
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=2,intra_cache_gbps=8,intra_eager_gbps=4,"
                  "cache_bytes=1048576,reduce_gbps=1000")
              .is_ok());
  CHECK(t.single_copy_bytes == 0);  // auto: 64 KiB where each rank has a CPU, else 32 KiB
  CHECK(intra_link_gbps(s, t, 64 << 10) == Approx(8));  // single copy (the default path)
  CHECK(intra_link_gbps(s, t, 64 << 10, 32 << 10, 0, Path::Eager) == Approx(4));
  CHECK(intra_link_gbps(s, t, 256 << 10, 64 << 10) == Approx(8));  // single copy
  // A ring on 2 ranks sends S / 2: eager below 2 x 64 KiB.
  CHECK(eager_below(Coll::AllReduce, Algo::Ring, s, t, {}) == Approx(128 << 10));
  // A ring allreduce of 64 KiB on 2 ranks sends 32 KiB messages: S / 4 GB/s; 256 KiB: S / 8.
  CHECK(predict_us(Coll::AllReduce, Algo::Ring, 64 << 10, s, t, {}) ==
        Approx((64 << 10) * 1e-3 / 4));
  CHECK(predict_us(Coll::AllReduce, Algo::Ring, 256 << 10, s, t, {}) ==
        Approx((256 << 10) * 1e-3 / 8));
  // Oversubscribed, in cache: the eager rate by CPU share; from 32 KiB single copy.
  CHECK(intra_link_gbps(one_host(4, 2), t, 16 << 10, 4 << 10, 0, Path::Eager) == Approx(2));
  CHECK(intra_link_gbps(one_host(4, 2), t, 64 << 10, 16 << 10, 0, Path::Eager) == Approx(2));
  CHECK(eager_below(Coll::AllReduce, Algo::Tree, one_host(4, 2), t, {}) == Approx(64 << 10));
  CHECK(intra_link_gbps(one_host(4, 2), t, 64 << 10, 32 << 10) == Approx(4));
  CHECK(intra_link_gbps(s, t, 64 << 10, 32 << 10, 0, Path::Eager) == Approx(4));
  // Off (0): the cache rate for every message.
  REQUIRE(t.apply("intra_eager_gbps=0").is_ok());
  CHECK(intra_link_gbps(s, t, 64 << 10, 32 << 10, 0, Path::Eager) == Approx(8));
  // The threshold is the shared-memory transport's setting, which the selector does not read:
  // the communicator adds it from that transport's cost facts (detail::plan_tuning).
  auto cfg = config::Config::load({{"LOOM_SHM_SINGLE_COPY_MIN", "128K"}});
  REQUIRE(cfg.is_ok());
  CHECK(tuning_from(*cfg)->single_copy_bytes == 0);
  CHECK(detail::plan_tuning(*cfg)->single_copy_bytes == 131072);
  auto bad = config::Config::load({{"LOOM_SHM_SINGLE_COPY_MIN", "lots"}});
  REQUIRE(bad.is_ok());
  auto rejected = detail::plan_tuning(*bad);
  REQUIRE_FALSE(rejected.is_ok());
  CHECK_THAT(rejected.status().message(), Catch::Matchers::Contains("LOOM_SHM_SINGLE_COPY_MIN"));
  auto off = config::Config::load({{"LOOM_SHM_SINGLE_COPY", "off"}});
  REQUIRE(off.is_ok());
  CHECK(detail::plan_tuning(*off)->single_copy_bytes > 1e20);
}

TEST_CASE("selector: the cost model's shm defaults are what the shm transport states",
          "[selector][registry]") {
  // Tuning::shm defaults stand in for the transport where no communicator fills them (tests,
  // loom-perf's calibration): they must equal the transport's own policy.
  auto cfg = config::Config::load({});
  REQUIRE(cfg.is_ok());
  auto facts = transport::builtin_transports().cost_facts(transport::TransportKind::Shm, *cfg);
  REQUIRE(facts.is_ok());
  const Tuning defaults;
  CHECK(defaults.shm.single_copy_min == facts->auto_single_copy_min);
  CHECK(defaults.shm.shared_cpu_single_copy_min == facts->auto_shared_cpu_single_copy_min);
  CHECK(defaults.shm.reuse_slots_above == facts->reuse_slots_above);
  CHECK(facts->auto_single_copy_min ==
        static_cast<double>(transport::shm::auto_single_copy_min(1.0)));
  CHECK(facts->auto_shared_cpu_single_copy_min ==
        static_cast<double>(transport::shm::auto_single_copy_min(2.0)));
  const Tuning filled = detail::plan_tuning(*cfg).value();
  CHECK(filled.single_copy_bytes == 0);  // auto
  CHECK(filled.shm.single_copy_min == defaults.shm.single_copy_min);
}

TEST_CASE("selector: a one-chunk tree where CPUs run 3+ ranks crosses its levels in rounds",
          "[selector]") {
  // Latencies off: only the data terms. In cache, a 16 KiB eager chunk takes 4.096 us at the
  // eager rate (4 GB/s) with a CPU to itself.
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=0,intra_gbps=1,intra_cache_gbps=8,intra_eager_gbps=4,"
                  "cache_bytes=1048576,core_cache_bytes=4194304,reduce_gbps=1000,"
                  "oversub_alpha_us=0,oversub_turn_us=0")
              .is_ok());
  const double chunk_us = (16 << 10) * 1e-3 / 4;
  Shape six = one_host(6, 2);  // 3 ranks per CPU: the channels reuse their first slot
  six.tree_depth = 2;
  // Up and down 2 levels, each a round of the busiest CPU's 3 ranks at 3/4 of a chunk each.
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 32 << 10, six, t, {}) ==
        Approx(2 * 2 * 0.75 * 3 * chunk_us));
  six.tree_depth = 4;  // twice the levels, twice the time
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 32 << 10, six, t, {}) ==
        Approx(2 * 4 * 0.75 * 3 * chunk_us));
  // Two ranks per CPU: the pipeline's rule, half the fill plus the stream at the CPU share
  // (2 x 3/4 x 32 KiB at 4/2 GB/s).
  Shape four = one_host(4, 2);
  four.tree_depth = 2;
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 32 << 10, four, t, {}) ==
        Approx(2 * (2 * chunk_us / 2) + 2 * 0.75 * (32 << 10) * 1e-3 / 2));
  // 64 KiB: 32 KiB chunks are single copy (auto on a shared CPU), not the rounds; eager when the
  // threshold is above them.
  six.tree_depth = 2;
  const double single = predict_us(Coll::AllReduce, Algo::Tree, 64 << 10, six, t, {});
  t.single_copy_bytes = 128 << 10;
  CHECK(predict_us(Coll::AllReduce, Algo::Tree, 64 << 10, six, t, {}) ==
        Approx(2 * 2 * 0.75 * 3 * 2 * chunk_us));
  CHECK(single != Approx(2 * 2 * 0.75 * 3 * 2 * chunk_us));
  // The rule follows the shared-memory transport's auto slot order (Tuning::shm).
  CHECK_FALSE(transport::shm::auto_reuse_slots(2));
  CHECK(transport::shm::auto_reuse_slots(3));
  CHECK(t.shm.reuse_slots_above == 2);
}

TEST_CASE("selector: a fused receive-reduce costs no separate pass on one host", "[selector]") {
  Shape s;
  s.nranks = 4;
  s.per_host = 4;
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=1,intra_gbps=2,reduce_gbps=1").is_ok());
  const double fused = predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, s, t, {});
  REQUIRE(t.apply("fused_reduce=0").is_ok());
  const double separate = predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, s, t, {});
  REQUIRE(separate == Approx(fused + 0.75 * (1 << 20) * 1e-3));  // 3/4 of 1 MiB at 1 GB/s
  // Across hosts the network transport receives first and reduces after, fused or not.
  REQUIRE(t.apply("fused_reduce=1").is_ok());
  s.nhosts = 2;
  s.per_host = 2;
  const double two_hosts = predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, s, t, {});
  REQUIRE(t.apply("fused_reduce=0").is_ok());
  REQUIRE(predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, s, t, {}) == Approx(two_hosts));
}

using Settings = std::map<std::string, std::string>;

// Two ranks (threads) build a communicator, each with its own settings, and run `body` on it:
// each rank's error message ("" when it succeeded), after both have finished.
std::array<std::string, 2> on_two_ranks(std::uint64_t comm_id,
                                        const std::function<Settings(int)>& settings,
                                        const std::function<void(Communicator&)>& body = {}) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::array<std::string, 2> errors;
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm = test::make_comm(store, r, 2, comm_id, settings(r));
        if (body) body(comm);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST_CASE("selector: ranks with different LOOM_ALGO refuse to build a communicator", "[selector]") {
  // A long timeout: rank 0 must learn rank 1's reason at the closing rendezvous, not time out.
  auto errors = on_two_ranks(0x5e1ec7, [](int r) {
    return Settings{{"LOOM_TIMEOUT", "120s"}, {"LOOM_ALGO", r == 0 ? "auto" : "allreduce:tree"}};
  });
  const std::string why = "LOOM_ALGO=allreduce:tree here but LOOM_ALGO=auto on rank 0";
  INFO(errors[1]);
  REQUIRE(errors[1].find(why) != std::string::npos);
  INFO(errors[0]);
  CHECK(errors[0].find("rank 1 failed before reaching it") != std::string::npos);
  CHECK(errors[0].find(why) != std::string::npos);
  CHECK(errors[0].find("timed out") == std::string::npos);
}

TEST_CASE("selector: LOOM_CHUNK_SIZE parses auto or a size in [64, 1G]", "[selector]") {
  auto chunk = [](const char* text) {
    auto cfg = config::Config::load({{"LOOM_CHUNK_SIZE", text}});
    REQUIRE(cfg.is_ok());
    return chunk_from(*cfg);
  };
  CHECK(chunk("auto").value() == 0);
  CHECK(chunk("1M").value() == std::size_t{1} << 20);
  CHECK(chunk("64").value() == 64);
  CHECK_FALSE(chunk("32").is_ok());
  CHECK_FALSE(chunk("2G").is_ok());
  auto bad = chunk("big");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("LOOM_CHUNK_SIZE='big'") != std::string::npos);
  CHECK(auto_chunk_bytes(false) == std::size_t{128} << 10);
  CHECK(auto_chunk_bytes(true) == std::size_t{512} << 10);
}

// Rank 1 with an explicit LOOM_CHUNK_SIZE, rank 0 with auto: rank 1's error ("" when they
// agree; then an allreduce of several chunks must be exact).
std::string chunk_disagreement(const char* rank1_chunk, const Settings& extra) {
  auto errors = on_two_ranks(
      0xc4c4,
      [&](int r) {
        Settings s = extra;
        s["LOOM_TIMEOUT"] = "3s";
        s["LOOM_CHUNK_SIZE"] = r == 0 ? "auto" : rank1_chunk;
        return s;
      },
      [](Communicator& comm) {
        std::vector<std::int32_t> buf(300'000, comm.rank() + 1);
        comm.allreduce(std::span<std::int32_t>(buf), RedOp::Sum).wait();
        CHECK(std::count(buf.begin(), buf.end(), 3) == static_cast<std::ptrdiff_t>(buf.size()));
      });
  return errors[1];
}

TEST_CASE("selector: LOOM_CHUNK_SIZE=auto is 128K over shm and tcp, 512K over ofi", "[selector]") {
  CHECK(chunk_disagreement("128K", {}).empty());
  CHECK(chunk_disagreement("128K", {{"LOOM_TRANSPORTS", "tcp"}}).empty());
  CHECK_THAT(chunk_disagreement("512K", {}),
             Catch::Matchers::Contains("LOOM_CHUNK_SIZE=524288 here but LOOM_CHUNK_SIZE=131072 "
                                       "on rank 0"));
  if (!transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: the ofi case is skipped");
    return;
  }
  const Settings ofi = {{"LOOM_TRANSPORTS", "ofi"},
                        {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
                        {"LOOM_OFI_FALLBACK", "false"}};
  CHECK(chunk_disagreement("512K", ofi).empty());
  CHECK_FALSE(chunk_disagreement("128K", ofi).empty());
}

TEST_CASE("selector: replaying the real plans completes and matches the model on simple cases",
          "[selector][replay]") {
  const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                        Coll::Reduce};
  for (int per_host : {0, 4})
    for (int n : {2, 3, 8, 13})
      for (Coll coll : colls)
        for (Algo a : {Algo::Ring, Algo::Tree, Algo::Deterministic}) {
          if (!select::supports(coll, a)) continue;
          auto c = preset("25gbe", Tuning{}, 0);
          REQUIRE(c.is_ok());
          c->per_host = per_host;
          for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20}) {
            INFO(to_string(coll) << " " << to_string(a) << " n " << n << " per host " << per_host
                                 << " bytes " << bytes);
            auto r = replay(coll, a, bytes, shape_of(*c, n), c->tuning, {64 << 10, 2});
            REQUIRE(r.is_ok());
            REQUIRE((bytes < 64 ? r->us >= 0 : r->us > 0));
          }
        }
  // Two ranks, ring allreduce of 1 MiB at 1 GB/s and 10 us: each half crosses once each way.
  Tuning t;
  REQUIRE(t.apply("intra_alpha_us=10,intra_gbps=1,reduce_gbps=1000").is_ok());
  Shape two;
  two.nranks = 2;
  two.per_host = 2;
  const Pipeline big{std::size_t{1} << 20, 4};
  auto r = replay(Coll::AllReduce, Algo::Ring, 1 << 20, two, t, big);
  REQUIRE(r.is_ok());
  REQUIRE(r->us ==
          Approx(predict_us(Coll::AllReduce, Algo::Ring, 1 << 20, two, t, big)).epsilon(0.02));
  // Too large to replay: a clear error instead of minutes of work.
  Shape many;
  many.nranks = 64;
  many.per_host = 64;
  REQUIRE(!replay(Coll::AllReduce, Algo::Ring, 1 << 20, many, t, {1024, 4}, 1000).is_ok());
}

TEST_CASE("selector: the model agrees with the replayed plans on latency-bound allreduces",
          "[selector][replay]") {
  for (auto name : {"25gbe", "8gpu-4efa"}) {
    auto c = preset(name, Tuning{}, 0);
    REQUIRE(c.is_ok());
    for (int n : {16, 64})
      for (Algo a : {Algo::Ring, Algo::Tree}) {
        Shape s = shape_of(*c, n);
        auto r = replay(Coll::AllReduce, a, 64, s, c->tuning, {});
        REQUIRE(r.is_ok());
        const double model = predict_us(Coll::AllReduce, a, 64, s, c->tuning, {});
        INFO(name << " n " << n << " " << to_string(a) << " model " << model << " replay "
                  << r->us);
        REQUIRE(model == Approx(r->us).epsilon(0.15));
      }
  }
}

TEST_CASE("selector: the cost table holds the model's times and interpolates between points",
          "[selector]") {
  Tuning t;
  REQUIRE(t.apply("intra_cache_gbps=8,intra_eager_gbps=4,cache_bytes=1048576,dram_bytes=8388608")
              .is_ok());
  const Pipeline p;
  for (const Shape& s : {one_host(8, 0), one_host(8, 2), one_host(5, 2), one_host(2, 8)}) {
    const CostTable table = CostTable::build(s, t, p);
    for (std::size_t ci = 0; ci < kColls; ++ci)
      for (std::size_t ai = 0; ai < kAlgos; ++ai) {
        const auto c = static_cast<Coll>(ci);
        const auto a = static_cast<Algo>(ai);
        if (!select::supports(c, a) || select::row(a).unfit(s) != nullptr) {
          CHECK(table.time_us(c, a, 4096) == -1);
          continue;
        }
        // At the table's points: the model on the transport's path.
        for (std::size_t bytes : {std::size_t{8}, std::size_t{5} << 10, std::size_t{64} << 10,
                                  std::size_t{3} << 20, std::size_t{1} << 30}) {
          CAPTURE(to_string(c), to_string(a), s.nranks, s.cores, bytes);
          CHECK(table.time_us(c, a, bytes) == Approx(predict_us(c, a, bytes, s, t, p)));
          CHECK(table.path(c, a, bytes) == (static_cast<double>(bytes) < eager_below(c, a, s, t, p)
                                                ? Path::Eager
                                                : Path::Direct));
        }
        // Between two points (128 KiB and 160 KiB): linear in bytes.
        const std::size_t lo = std::size_t{128} << 10, hi = lo + lo / 4, mid = lo + lo / 8;
        const Path path = table.path(c, a, mid);
        CHECK(table.time_us(c, a, mid) ==
              Approx((model_us(c, a, path, static_cast<double>(lo), s, t, p) +
                      model_us(c, a, path, static_cast<double>(hi), s, t, p)) /
                     2));
      }
  }
  // Recursive doubling stops being a candidate above rd_max_bytes.
  const CostTable table = CostTable::build(one_host(8, 0), t, p);
  CHECK(table.time_us(Coll::AllReduce, Algo::Rd, 262144) < kNever);
  CHECK(table.time_us(Coll::AllReduce, Algo::Rd, 262145) >= kNever);
}
