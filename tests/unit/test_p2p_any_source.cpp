// recv_any (a receive from any source), threads as ranks, over shm and tcp: every message
// taken once with its sender named, each sender's messages in its order, at 3 and 4 ranks;
// named receives queued behind an unresolved one keep their per-peer order; the tag selects
// among senders; zero-size messages; the call numbering of collectives is untouched. Errors: a
// receive nobody matches times out naming "any source" and the tag, a size that differs is a
// Mismatch naming both ranks, and groups, sends and ofi connections are refused.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm_harness.hpp"
#include "transports/ofi/ofi_fabric.hpp"

using namespace loom;
using loom::test::error_of;
using loom::test::Findings;
using loom::test::names;

namespace {

constexpr std::size_t kWords = 1000;

// Message `m` from rank `src`: every word says who sent it and which one it is.
std::vector<std::int64_t> payload(int src, int m, std::size_t count = kWords) {
  std::vector<std::int64_t> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = src * 1'000'000 + m * 10'000 + static_cast<std::int64_t>(i);
  return v;
}

// Rank 0 receives 2 messages from every other rank, from any source; the others send theirs
// (blocking sends of small messages, then larger ones that wait for their receiver).
void gather_from_any(Communicator& comm, Findings& f, const std::string& what, std::size_t count) {
  const int r = comm.rank(), n = comm.size();
  if (r != 0) {
    for (int m = 0; m < 2; ++m)
      comm.send(std::span<const std::int64_t>(payload(r, m, count)), 0, 4).wait();
  } else {
    std::map<int, int> next;  // per sender, the message expected next
    for (int k = 0; k < 2 * (n - 1); ++k) {
      std::vector<std::int64_t> in(count, -1);
      int src = -1;
      comm.recv_any(std::span<std::int64_t>(in), &src, 4).wait();
      if (src < 1 || src >= n) {
        f.add(what + ": source " + std::to_string(src));
        continue;
      }
      const int m = next[src]++;
      if (in != payload(src, m, count))
        f.add(what + ": message " + std::to_string(m) + " from rank " + std::to_string(src));
    }
    for (int s = 1; s < n; ++s)
      if (next[s] != 2)
        f.add(what + ": rank " + std::to_string(s) + " seen " + std::to_string(next[s]));
  }
  // The collectives' numbering is untouched by the receives.
  std::vector<std::int32_t> x(5, r + 1);
  comm.allreduce(std::span<std::int32_t>(x), RedOp::Sum).wait();
  if (x[4] != n * (n + 1) / 2) f.add(what + ": the allreduce after the receives");
}

}  // namespace

TEST_CASE("p2p any source: every message once, its sender named, at 3 and 4 ranks", "[p2p][any]") {
  for (const char* t : {"shm", "tcp"})
    for (int n : {3, 4})
      for (std::size_t count : {kWords, std::size_t{0}, std::size_t{300'000}}) {
        const std::string what =
            std::string(t) + " x" + std::to_string(n) + ", " + std::to_string(count) + " words";
        Findings f;
        loom::test::run_ranks(n, [&](Communicator& comm) { gather_from_any(comm, f, what, count); },
                              {{"LOOM_TRANSPORTS", t}});
        INFO(f.first);
        CHECK(f.wrong == 0);
      }
}

// Rank 1 sends A0, A1 and rank 2 sends B0, B1 to rank 0, which queues: any, from 1, from 2
// (alone or as one group), any, before it waits. Whichever sender the first takes, each rank's
// messages stay in order.
TEST_CASE("p2p any source: named receives queued behind it keep each sender's order",
          "[p2p][any]") {
  for (const char* t : {"shm", "tcp"})
    for (bool grouped : {false, true}) {
      Findings f;
      loom::test::run_ranks(
          3,
          [&](Communicator& comm) {
            const int r = comm.rank();
            if (r != 0) {
              for (int m = 0; m < 2; ++m)
                comm.send(std::span<const std::int64_t>(payload(r, m)), 0).wait();
              return;
            }
            std::vector<std::vector<std::int64_t>> in(4, std::vector<std::int64_t>(kWords, -1));
            int first = -1, last = -1;
            std::vector<Work> w;
            w.push_back(comm.recv_any(std::span<std::int64_t>(in[0]), &first));
            if (grouped) comm.group_start();  // one operation: numbered as it starts, too
            w.push_back(comm.recv(std::span<std::int64_t>(in[1]), 1));
            w.push_back(comm.recv(std::span<std::int64_t>(in[2]), 2));
            if (grouped) comm.group_end();
            w.push_back(comm.recv_any(std::span<std::int64_t>(in[3]), &last));
            for (Work& x : w) x.wait();
            const int other = first == 1 ? 2 : 1;
            const bool ok = (first == 1 || first == 2) && last == other &&
                            in[0] == payload(first, 0) && in[3] == payload(other, 1) &&
                            in[1] == payload(1, first == 1 ? 1 : 0) &&
                            in[2] == payload(2, first == 2 ? 1 : 0);
            if (!ok)
              f.add(std::string(t) + (grouped ? ", grouped" : "") + ": first from " +
                    std::to_string(first) + ", last from " + std::to_string(last));
          },
          {{"LOOM_TRANSPORTS", t}});
      INFO(f.first);
      CHECK(f.wrong == 0);
    }
}

// Rank 1's message (tag 7) is sent first; a receive from any source with tag 3 takes rank 2's.
TEST_CASE("p2p any source: the tag selects the message", "[p2p][any]") {
  Findings f;
  loom::test::run_ranks(3,
                        [&](Communicator& comm) {
                          const int r = comm.rank();
                          std::vector<std::int64_t> go(1);
                          if (r == 1) {  // sends first, then tells rank 2 to send
                            comm.send(std::span<const std::int64_t>(payload(1, 0)), 0, 7).wait();
                            comm.send(std::span<const std::int64_t>(go), 2).wait();
                          }
                          if (r == 2) {
                            comm.recv(std::span<std::int64_t>(go), 1).wait();
                            comm.send(std::span<const std::int64_t>(payload(2, 0)), 0, 3).wait();
                          }
                          if (r != 0) return;
                          std::vector<std::int64_t> a(kWords), b(kWords);
                          int src = -1;
                          comm.recv_any(std::span<std::int64_t>(a), &src, 3).wait();
                          comm.recv(std::span<std::int64_t>(b), 1, 7).wait();
                          if (src != 2 || a != payload(2, 0) || b != payload(1, 0))
                            f.add("took the message of rank " + std::to_string(src));
                        },
                        {{"LOOM_TRANSPORTS", "tcp"}});
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p any source: errors name the rank, the peer, the call", "[p2p][any][errors]") {
  Findings f;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> buf(16);
    auto expect = [&](const std::optional<Error>& e, ErrorCode code,
                      std::initializer_list<std::string> parts, const std::string& what) {
      if (!names(e, code, parts)) f.add(what + ": " + (e ? e->what() : "no error"));
    };
    int src = -1;
    expect(error_of([&] {
             comm.group_start();
             comm.recv_any(buf.data(), 16, DataType::Float32, &src);
           }),
           ErrorCode::InvalidUsage, {"rank " + std::to_string(r), "any source", "group"},
           "in a group");
    comm.group_end();
    if (r == 1) {
      CollOptions o;
      o.timeout = std::chrono::milliseconds(300);
      expect(error_of([&] { comm.recv_any(buf.data(), 16, DataType::Float32, &src, 5, o).wait(); }),
             ErrorCode::Timeout, {"rank 1", "recv from any source", "tag 5"}, "unmatched");
    }
  });
  // A size that differs: both ranks fail with Mismatch naming both (on a fresh communicator:
  // the timeout above failed that one).
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> buf(16);
    int src = -1;
    auto e = error_of([&] {
      if (comm.rank() == 0)
        comm.send(buf.data(), 8, DataType::Float32, 1).wait();
      else
        comm.recv_any(buf.data(), 16, DataType::Float32, &src).wait();
    });
    if (comm.rank() == 1 && !names(e, ErrorCode::Mismatch, {"rank 0", "rank 1"}))
      f.add(std::string("size: ") + (e ? e->what() : "no error"));
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p any source: refused over ofi, which cannot look before receiving",
          "[p2p][any][ofi]") {
  if (!loom::transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: skipped");
    return;
  }
  Findings f;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() != 0) return;
        std::vector<float> buf(16);
        int src = -1;
        auto e = error_of([&] { comm.recv_any(buf.data(), 16, DataType::Float32, &src).wait(); });
        if (!names(e, ErrorCode::InvalidUsage, {"rank 0", "rank 1", "ofi", "named rank"}))
          f.add(e ? e->what() : "no error");
      },
      {{"LOOM_TRANSPORTS", "ofi"},
       {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
       {"LOOM_OFI_FALLBACK", "false"}});
  INFO(f.first);
  CHECK(f.wrong == 0);
}
