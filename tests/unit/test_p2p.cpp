// send, recv and sendrecv, threads as ranks, over shm, tcp and ofi: exact payloads in a ring at
// odd rank counts, zero-size and large messages, order and tags between a pair, a receive posted
// before its send, collectives between point-to-point calls; a tag or size that differs is a
// Mismatch naming both ranks, an unmatched receive times out naming the peer and the tag, a
// peer that leaves fails a waiting receive with PeerFailed, bad arguments are refused.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"
#include "end_together.hpp"
#include "transports/ofi/ofi_fabric.hpp"

using namespace loom;
using loom::test::error_of;
using loom::test::Findings;
using loom::test::names;
using Clock = std::chrono::steady_clock;

namespace {

// Element i of message `m` from rank `src` to rank `dst`.
std::uint32_t word(int src, int dst, int m, std::size_t i) {
  return static_cast<std::uint32_t>(src * 1000003 + dst * 7919 + m * 131 + static_cast<int>(i));
}

std::vector<std::uint32_t> message(int src, int dst, int m, std::size_t count) {
  std::vector<std::uint32_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = word(src, dst, m, i);
  return v;
}

// Every rank sends to the next and receives from the previous at once, for several sizes; then
// an allreduce checks that the collective numbering is untouched by the sends.
void ring(Communicator& comm, Findings& f, const std::string& what) {
  const int r = comm.rank(), n = comm.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  int m = 0;
  for (std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{1001}, std::size_t{1} << 20}) {
    const auto out = message(r, next, m, count);
    std::vector<std::uint32_t> in(count + 1, 0xdeadbeef);
    comm.sendrecv(out.data(), count, next, in.data(), count, prev, DataType::Uint32, m).wait();
    if (in.back() != 0xdeadbeef) f.add(what + ": wrote past the receive");
    in.pop_back();
    if (in != message(prev, r, m, count))
      f.add(what + ": rank " + std::to_string(r) + " message of " + std::to_string(count));
    ++m;
    comm.allreduce(std::span<std::uint32_t>(in.data(), std::min<std::size_t>(count, 4)), RedOp::Max)
        .wait();
  }
}

void run_ring(int n, std::map<std::string, std::string> settings, const std::string& what) {
  Findings f;
  loom::test::run_ranks(
      n, [&](Communicator& comm) { ring(comm, f, what); }, std::move(settings));
  INFO(f.first);
  CHECK(f.wrong == 0);
}

}  // namespace

TEST_CASE("p2p: a ring of sendrecv over shm and tcp at 2, 3 and 5 ranks", "[p2p]") {
  for (const char* t : {"shm", "tcp"})
    for (int n : {2, 3, 5})
      run_ring(n, {{"LOOM_TRANSPORTS", t}}, std::string(t) + " x" + std::to_string(n));
}

TEST_CASE("p2p: a ring of sendrecv over ofi at 3 ranks", "[p2p][ofi]") {
  if (!loom::transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: skipped");
    return;
  }
  run_ring(3,
           {{"LOOM_TRANSPORTS", "ofi"},
            {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
            {"LOOM_OFI_FALLBACK", "false"}},
           "ofi");
}

// Rank 0 sends five messages of different sizes and tags without waiting; rank 1 receives them
// in the same order. Then rank 1 posts a receive long before rank 0 sends.
TEST_CASE("p2p: messages between a pair arrive in order; a receive may come first", "[p2p]") {
  for (const char* t : {"shm", "tcp"}) {
    Findings f;
    loom::test::run_ranks(
        3,
        [&](Communicator& comm) {
          const int r = comm.rank();
          const std::size_t sizes[] = {3, 0, 70000, 1, 5 << 20};
          std::vector<std::vector<std::uint32_t>> bufs;
          std::vector<Work> pending;
          for (int m = 0; m < 5; ++m) {
            const std::size_t c = sizes[m];
            if (r == 0) {
              bufs.push_back(message(0, 1, m, c));
              pending.push_back(comm.send(bufs.back().data(), c, DataType::Uint32, 1, 10 + m));
            } else if (r == 1) {
              bufs.emplace_back(c, 0u);
              pending.push_back(comm.recv(bufs.back().data(), c, DataType::Uint32, 0, 10 + m));
            }
          }
          for (auto& w : pending) w.wait();
          if (r == 1)
            for (int m = 0; m < 5; ++m)
              if (bufs[std::size_t(m)] != message(0, 1, m, sizes[m]))
                f.add(std::string(t) + ": message " + std::to_string(m));
          // Receive first: rank 2 waits for rank 1, which sends after 300 ms.
          std::vector<std::int64_t> late(257, -1);
          if (r == 2) {
            Work w = comm.recv(std::span<std::int64_t>(late), 1, 3);
            w.wait();
            for (std::size_t i = 0; i < late.size(); ++i)
              if (late[i] != std::int64_t(i) * 3) f.add(std::string(t) + ": late receive");
          } else if (r == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            for (std::size_t i = 0; i < late.size(); ++i) late[i] = std::int64_t(i) * 3;
            comm.send(std::span<const std::int64_t>(late), 2, 3).wait();
          }
          comm.barrier().wait();
        },
        {{"LOOM_TRANSPORTS", t}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

// A two-stage pipeline per pair (0 -> 1, 2 -> 3) with an allreduce over all four after each
// micro-batch, as pipeline plus data parallelism does.
TEST_CASE("p2p: a two-stage pipeline with collectives in between", "[p2p]") {
  Findings f;
  loom::test::run_ranks(4, [&](Communicator& comm) {
    const int r = comm.rank();
    const bool first_stage = r % 2 == 0;
    const int partner = first_stage ? r + 1 : r - 1;
    for (int micro = 0; micro < 4; ++micro) {
      std::vector<float> act(4096, 0.0f);
      if (first_stage) {
        for (std::size_t i = 0; i < act.size(); ++i) act[i] = float(micro * 10 + r + int(i % 7));
        comm.send(std::span<const float>(act), partner).wait();
      } else {
        comm.recv(std::span<float>(act), partner).wait();
        for (std::size_t i = 0; i < act.size(); ++i)
          if (act[i] != float(micro * 10 + partner + int(i % 7))) {
            f.add("activation " + std::to_string(i) + " of micro-batch " + std::to_string(micro));
            break;
          }
      }
      std::vector<float> grad(1000, float(r + 1));
      comm.allreduce(std::span<float>(grad), RedOp::Sum).wait();
      if (grad[999] != 10.0f) f.add("allreduce after micro-batch " + std::to_string(micro));
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p: a tag or size that differs is a Mismatch naming both ranks", "[p2p][errors]") {
  for (const char* t : {"shm", "tcp"}) {
    Findings f;
    loom::test::run_together(
        2,
        [&](Communicator& comm) {
          const int r = comm.rank();
          std::vector<double> buf(64, 1.0);
          std::optional<Error> e;
          if (r == 0) {
            e = error_of([&] { comm.send(buf.data(), 64, DataType::Float64, 1, 7).wait(); });
          } else {
            e = error_of([&] { comm.recv(buf.data(), 64, DataType::Float64, 0, 8).wait(); });
            if (!names(e, ErrorCode::Mismatch, {"rank 0", "rank 1", "tag 7", "tag 8"}))
              f.add(std::string(t) + " tag: " + (e ? e->what() : "no error"));
          }
          (void)e;
        },
        {{"LOOM_TRANSPORTS", t}, {"LOOM_TIMEOUT", "20s"}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
  Findings f;
  loom::test::run_together(2, [&](Communicator& comm) {
    std::vector<std::int32_t> buf(64, 1);
    if (comm.rank() == 0) {
      (void)error_of([&] { comm.send(buf.data(), 40, DataType::Int32, 1).wait(); });
    } else {
      auto e = error_of([&] { comm.recv(buf.data(), 32, DataType::Int32, 0).wait(); });
      if (!names(e, ErrorCode::Mismatch, {"rank 0", "rank 1", "160 bytes", "128 bytes"}))
        f.add(std::string("size: ") + (e ? e->what() : "no error"));
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p: a receive never matched times out naming the peer and the tag", "[p2p][errors]") {
  Findings f;
  loom::test::run_together(2, [&](Communicator& comm) {
    if (comm.rank() != 1) return;
    std::vector<float> buf(16);
    CollOptions o;
    o.timeout = std::chrono::milliseconds(400);
    const auto t0 = Clock::now();
    auto e = error_of([&] { comm.recv(buf.data(), 16, DataType::Float32, 0, 5, o).wait(); });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!names(e, ErrorCode::Timeout, {"rank 1", "rank 0", "tag 5"}) || s > 5.0)
      f.add((e ? std::string(e->what()) : std::string("no error")) + " after " + std::to_string(s));
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p: a peer that leaves fails a waiting receive with PeerFailed", "[p2p][errors]") {
  Findings f;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        comm.barrier().wait();  // connected
        if (comm.rank() == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          comm.abort();  // gone, without sending
          return;
        }
        std::vector<float> buf(16);
        const auto t0 = Clock::now();
        auto e = error_of([&] { comm.recv(buf.data(), 16, DataType::Float32, 0).wait(); });
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!e || e->code() != ErrorCode::PeerFailed || s > 10.0)
          f.add((e ? std::string(e->what()) : std::string("no error")) + " after " +
                std::to_string(s));
      },
      {{"LOOM_TIMEOUT", "30s"}});
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("p2p: bad arguments are refused and take no message number", "[p2p][errors]") {
  Findings f;
  loom::test::run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::int32_t> a(8, r), b(8, -1);
    auto refused = [&](const char* what, const std::function<void()>& call) {
      auto e = error_of(call);
      if (!names(e, ErrorCode::InvalidArgument, {"rank " + std::to_string(r), what}))
        f.add(std::string(what) + ": " + (e ? e->what() : "no error"));
    };
    refused("out of range", [&] { comm.send(a.data(), 8, DataType::Int32, 3); });
    refused("out of range", [&] { comm.recv(b.data(), 8, DataType::Int32, -2); });
    refused("this rank", [&] { comm.send(a.data(), 8, DataType::Int32, r); });
    refused("null", [&] { comm.recv(nullptr, 8, DataType::Int32, (r + 1) % 3); });
    refused("overlap", [&] {
      comm.sendrecv(a.data(), 4, (r + 1) % 3, a.data() + 2, 4, (r + 2) % 3, DataType::Int32);
    });
    refused("neither", [&] { comm.sendrecv(a.data(), 4, -1, b.data(), 4, -1, DataType::Int32); });
    // The refused calls took no number: this exchange matches message #0 on both sides.
    comm.sendrecv(a.data(), 8, (r + 1) % 3, b.data(), 8, (r + 2) % 3, DataType::Int32).wait();
    if (b[7] != (r + 2) % 3) f.add("the exchange after the refused calls");
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}
