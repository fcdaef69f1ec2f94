// The cuda_ipc transport through the host simulation of the device seam: the FIFO protocol
// (pieces, flow control over more pieces than slots, zero-length messages, reductions read
// straight from the peer's slot, tag/length checks, a closed peer), the transport's setup
// (IPC handle exchange, routes p2p and host-staging, LOOM_TRANSPORTS exclusion), and
// LOOM_TRANSPORTS' cuda_ipc entries.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "core/transport_choice.hpp"
#include "device/device.hpp"
#include "device/host_sim.hpp"
#include "transports/cuda_ipc/cuda_ipc_transport.hpp"

using namespace loom;
using namespace loom::transport;
using namespace loom::transport::cuda_ipc;
using Catch::Matchers::Contains;

namespace {

Deadline soon() {
  return Deadline::after(std::chrono::seconds(30));
}

/// Two connections wired to each other by hand, each with its own stream (like two ranks).
struct Pair {
  device::Device& dev = device::host_sim();
  std::size_t slot;
  ControlBlock c01, c10;
  void* fifo0;
  void* fifo1;
  device::Stream s0 = value_or_throw(dev.create_stream());
  device::Stream s1 = value_or_throw(dev.create_stream());
  std::unique_ptr<CudaIpcConnection> a, b;  // rank 0's end, rank 1's end
  std::atomic<int> a_saw_failure{-1};       // rank 0's transport: whose failure it saw

  explicit Pair(std::size_t slot_bytes = kDefaultSlotBytes)
      : slot(slot_bytes),
        fifo0(value_or_throw(dev.alloc(kSlots * slot))),
        fifo1(value_or_throw(dev.alloc(kSlots * slot))) {
    auto* f0 = static_cast<std::uint8_t*>(fifo0);
    auto* f1 = static_cast<std::uint8_t*>(fifo1);
    a = value_or_throw(CudaIpcConnection::create(dev, s0, 0, 1, device::PeerRoute::PeerToPeer,
                                                 {&c01, f0, &c10, f1, &a_saw_failure, slot}));
    b = value_or_throw(CudaIpcConnection::create(dev, s1, 1, 0, device::PeerRoute::PeerToPeer,
                                                 {&c10, f1, &c01, f0, nullptr, slot}));
  }
  ~Pair() {
    a.reset();
    b.reset();
    (void)dev.synchronize(s0, soon());
    (void)dev.synchronize(s1, soon());
    dev.destroy_stream(s0);
    dev.destroy_stream(s1);
    dev.free(fifo0);
    dev.free(fifo1);
  }
  /// Tests both requests until both complete (bounded).
  void drive(Request send, Request recv) {
    bool sent = false, received = false;
    const Deadline d = soon();
    while (!(sent && received)) {
      REQUIRE_FALSE(d.expired());
      if (!sent) sent = value_or_throw(a->test(send));
      if (!received) received = value_or_throw(b->test(recv));
    }
  }
};

Tag tag_of(std::uint64_t seq, std::uint64_t count) {
  Tag t;
  t.seq = seq;
  t.count = count;
  return t;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t salt) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + i / 251 + salt);
  return v;
}

/// A device buffer holding `init`.
void* on_device(device::Device& dev, const std::vector<std::uint8_t>& init) {
  void* p = value_or_throw(dev.alloc(std::max<std::size_t>(init.size(), 1)));
  std::memcpy(p, init.data(), init.size());  // host-sim device memory is host memory
  return p;
}

/// Runs fn(rank) for ranks 0 and 1, each on its own thread (host-sim's device 0 and 1: one
/// simulated island); each rank's text is what fn returned, or the exception it threw.
std::vector<std::string> on_two_ranks(const std::function<std::string(int)>& fn) {
  std::vector<std::string> out(2);
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        throw_if_error(device::host_sim().set_device(r));
        out[static_cast<std::size_t>(r)] = fn(r);
      } catch (const std::exception& e) {
        out[static_cast<std::size_t>(r)] += e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("cuda_ipc: messages of every size arrive exactly, in order, over few slots",
          "[cuda_ipc]") {
  const std::size_t slot = GENERATE(kSlotAlign, kDefaultSlotBytes);  // LOOM_CUDA_IPC_SLOT_SIZE
  INFO("slot bytes " << slot);
  Pair pr(slot);
  const std::size_t sizes[] = {0, 1, 7, slot - 1, slot, slot + 1, (kSlots + 2) * slot + 5};
  std::uint64_t seq = 0;
  for (std::size_t n : sizes) {
    INFO("bytes " << n);
    auto src = pattern(n, static_cast<std::uint8_t>(seq));
    void* d_src = on_device(pr.dev, src);
    void* d_dst = on_device(pr.dev, std::vector<std::uint8_t>(n + 1, 0xee));
    const Tag t = tag_of(seq++, n);
    Request s = value_or_throw(pr.a->isend({d_src, n, nullptr}, 0, n, t));
    Request r = value_or_throw(pr.b->irecv({d_dst, n + 1, nullptr}, 0, n, t));
    pr.drive(s, r);
    CHECK(std::memcmp(d_dst, src.data(), n) == 0);
    CHECK(static_cast<std::uint8_t*>(d_dst)[n] == 0xee);  // nothing written past the message
    pr.dev.free(d_src);
    pr.dev.free(d_dst);
  }
}

TEST_CASE("cuda_ipc: several messages in flight keep their order", "[cuda_ipc]") {
  Pair pr;
  constexpr int kMsgs = 6;
  const std::size_t n = kDefaultSlotBytes + 3;  // two pieces each: 12 pieces through 4 slots
  std::vector<void*> srcs, dsts;
  std::vector<Request> sends, recvs;
  for (int m = 0; m < kMsgs; ++m) {
    srcs.push_back(on_device(pr.dev, pattern(n, static_cast<std::uint8_t>(m))));
    dsts.push_back(on_device(pr.dev, std::vector<std::uint8_t>(n, 0)));
    sends.push_back(value_or_throw(pr.a->isend({srcs.back(), n, nullptr}, 0, n, tag_of(9, m))));
  }
  for (int m = 0; m < kMsgs; ++m)
    recvs.push_back(value_or_throw(pr.b->irecv({dsts[m], n, nullptr}, 0, n, tag_of(9, m))));
  for (int m = 0; m < kMsgs; ++m) pr.drive(sends[m], recvs[m]);
  for (int m = 0; m < kMsgs; ++m) {
    CHECK(std::memcmp(dsts[m], pattern(n, static_cast<std::uint8_t>(m)).data(), n) == 0);
    pr.dev.free(srcs[m]);
    pr.dev.free(dsts[m]);
  }
}

// A message of many pieces shows its progress piece by piece (Connection::moved), which the
// executor counts as progress while no request completes.
TEST_CASE("cuda_ipc: moved() counts every piece of a message", "[cuda_ipc]") {
  Pair pr(kSlotAlign);
  const std::size_t n = (kSlots * 3) * kSlotAlign;  // 12 pieces through 4 slots
  void* src = on_device(pr.dev, pattern(n, 5));
  void* dst = on_device(pr.dev, std::vector<std::uint8_t>(n, 0));
  Request s = value_or_throw(pr.a->isend({src, n, nullptr}, 0, n, tag_of(3, n)));
  Request r = value_or_throw(pr.b->irecv({dst, n, nullptr}, 0, n, tag_of(3, n)));
  std::set<std::uint64_t> seen_a, seen_b;
  bool sent = false, received = false;
  const Deadline d = soon();
  while (!(sent && received)) {
    REQUIRE_FALSE(d.expired());
    if (!sent) sent = value_or_throw(pr.a->test(s));
    if (!received) received = value_or_throw(pr.b->test(r));
    seen_a.insert(pr.a->moved());
    seen_b.insert(pr.b->moved());
  }
  CHECK(std::memcmp(dst, pattern(n, 5).data(), n) == 0);
  CHECK(pr.a->moved() == std::uint64_t{24});  // each piece copied and published
  CHECK(pr.b->moved() == std::uint64_t{24});  // each piece taken and retired
  CHECK(seen_a.size() > 2);                   // seen growing before the send completed
  CHECK(seen_b.size() > 2);
  pr.dev.free(src);
  pr.dev.free(dst);
}

// A timeout's message says where a stuck message stands (PlanRun::pending appends state()).
TEST_CASE("cuda_ipc: state() tells what the oldest piece waits for", "[cuda_ipc]") {
  Pair pr(kSlotAlign);
  const std::size_t n = 2 * kSlotAlign;
  void* src = on_device(pr.dev, pattern(n, 1));
  Request s = value_or_throw(pr.a->isend({src, n, nullptr}, 0, n, tag_of(4, n)));
  const Deadline d = soon();
  while (pr.a->state().find("2 published") == std::string::npos) {
    REQUIRE_FALSE(d.expired());
    CHECK_FALSE(value_or_throw(pr.a->test(s)));  // nobody reads: never complete
  }
  CHECK_THAT(pr.a->state(), Catch::StartsWith("cuda_ipc pieces to rank 1: 2 enqueued, 2 "
                                              "published, 0 read by it (waiting: the peer has "
                                              "not read every piece)"));
  CHECK_THAT(pr.b->state(), Catch::Contains("from it: 2 published, 0 taken, 0 retired (waiting: "
                                            "nothing)"));
  void* dst = on_device(pr.dev, std::vector<std::uint8_t>(n, 0));
  Request r = value_or_throw(pr.b->irecv({dst, n, nullptr}, 0, n, tag_of(4, n)));
  pr.drive(s, r);
  CHECK_THAT(pr.a->state(), Catch::Contains("2 read by it (waiting: nothing)"));
  pr.dev.free(src);
  pr.dev.free(dst);
}

// The executor tests a lane's requests in any order and forgets each as it completes: a message
// posted after a later one completed first must still wait for its own last piece (a past bug
// counted from the last request still queued, so the final message completed one piece early
// and its sender waited forever for the slot to be freed).
TEST_CASE("cuda_ipc: requests completed out of order leave later messages exact", "[cuda_ipc]") {
  Pair pr;
  const std::size_t n = 1000;
  std::vector<void*> srcs, dsts;
  for (int m = 0; m < 3; ++m) {
    srcs.push_back(on_device(pr.dev, pattern(n, static_cast<std::uint8_t>(m + 40))));
    dsts.push_back(on_device(pr.dev, std::vector<std::uint8_t>(n, 0)));
  }
  std::vector<Request> sends, recvs;
  for (int m = 0; m < 2; ++m) {
    sends.push_back(value_or_throw(pr.a->isend({srcs[m], n, nullptr}, 0, n, tag_of(5, m))));
    recvs.push_back(value_or_throw(pr.b->irecv({dsts[m], n, nullptr}, 0, n, tag_of(5, m))));
  }
  pr.drive(sends[1], recvs[1]);  // the second message first: the first is done but still queued
  sends.push_back(value_or_throw(pr.a->isend({srcs[2], n, nullptr}, 0, n, tag_of(5, 2))));
  recvs.push_back(value_or_throw(pr.b->irecv({dsts[2], n, nullptr}, 0, n, tag_of(5, 2))));
  pr.drive(sends[0], recvs[0]);
  pr.drive(sends[2], recvs[2]);
  for (int m = 0; m < 3; ++m) {
    CHECK(std::memcmp(dsts[m], pattern(n, static_cast<std::uint8_t>(m + 40)).data(), n) == 0);
    pr.dev.free(srcs[m]);
    pr.dev.free(dsts[m]);
  }
  // Every piece was retired: the sender's slots are all free again.
  CHECK(pr.c01.consumed.load() == pr.c01.published.load());
  CHECK(pr.c01.published.load() == 3);
}

TEST_CASE("cuda_ipc: receive-reduce runs the kernel on the peer's slot", "[cuda_ipc]") {
  Pair pr;
  const std::size_t count = kDefaultSlotBytes / 4 * 2 + 3;  // three pieces of int32
  std::vector<std::int32_t> mine(count), theirs(count);
  for (std::size_t i = 0; i < count; ++i) {
    mine[i] = static_cast<std::int32_t>(i);
    theirs[i] = static_cast<std::int32_t>(3 * i + 1);
  }
  const std::size_t bytes = count * 4;
  auto* d_theirs = static_cast<std::int32_t*>(value_or_throw(pr.dev.alloc(bytes)));
  auto* d_mine = static_cast<std::int32_t*>(value_or_throw(pr.dev.alloc(bytes)));
  auto* d_out = static_cast<std::int32_t*>(value_or_throw(pr.dev.alloc(bytes)));
  std::memcpy(d_theirs, theirs.data(), bytes);
  std::memcpy(d_mine, mine.data(), bytes);
  const std::uint64_t launches = device::host_sim_reduce_launches();
  Request s = value_or_throw(pr.a->isend({d_theirs, bytes, nullptr}, 0, bytes, tag_of(1, count)));
  ReduceInto into{DataType::Int32, RedOp::Sum, d_mine, d_out};
  Request r = value_or_throw(pr.b->irecv_reduce(into, bytes, tag_of(1, count)));
  pr.drive(s, r);
  CHECK(device::host_sim_reduce_launches() - launches == 3);  // one kernel per piece
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += d_out[i] != static_cast<std::int32_t>(4 * i + 1);
  CHECK(wrong == 0);
  pr.dev.free(d_theirs);
  pr.dev.free(d_mine);
  pr.dev.free(d_out);
}

TEST_CASE("cuda_ipc: a tag or length mismatch fails naming both ranks", "[cuda_ipc]") {
  for (bool length : {false, true}) {
    Pair pr;
    void* buf = on_device(pr.dev, pattern(64, 1));
    Request sreq = value_or_throw(pr.a->isend({buf, 64, nullptr}, 0, 64, tag_of(5, 64)));
    // The mismatch shows when the piece is seen: at the post or at a later test.
    auto posted = length ? pr.b->irecv({buf, 64, nullptr}, 0, 32, tag_of(5, 64))
                         : pr.b->irecv({buf, 64, nullptr}, 0, 64, tag_of(6, 64));
    Status st = posted.status();
    const Deadline d = soon();
    while (st.is_ok() && !d.expired()) {
      (void)pr.a->test(sreq);  // publishes the piece once its copy is done
      auto got = pr.b->test(*posted);
      if (!got.is_ok())
        st = got.status();
      else
        REQUIRE_FALSE(*got);
    }
    REQUIRE_FALSE(st.is_ok());
    CHECK(st.code() == ErrorCode::Mismatch);
    CHECK_THAT(st.message(), Contains("rank 1") && Contains("rank 0"));
    (void)pr.dev.synchronize(pr.s0, soon());
    pr.dev.free(buf);
  }
}

TEST_CASE("cuda_ipc: a peer that closes fails the pending requests", "[cuda_ipc]") {
  Pair pr;
  void* buf = on_device(pr.dev, pattern(64, 2));
  Request r = value_or_throw(pr.b->irecv({buf, 64, nullptr}, 0, 64, tag_of(1, 64)));
  pr.a.reset();  // rank 0 goes away without sending
  auto got = pr.b->test(r);
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == ErrorCode::PeerFailed);
  CHECK_THAT(got.status().message(), Contains("rank 0"));
  CHECK(got.status().peer() == 0);
  pr.dev.free(buf);
}

TEST_CASE("cuda_ipc: a peer that closes after another rank failed names that rank", "[cuda_ipc]") {
  Pair pr;
  void* buf = on_device(pr.dev, pattern(64, 2));
  Request r = value_or_throw(pr.b->irecv({buf, 64, nullptr}, 0, 64, tag_of(1, 64)));
  pr.a_saw_failure = 3;  // rank 0 saw rank 3 fail, then tears down
  pr.a.reset();
  auto got = pr.b->test(r);
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == ErrorCode::PeerFailed);
  CHECK(got.status().peer() == 3);
  CHECK_THAT(
      got.status().message(),
      Contains("rank 1: cuda_ipc: rank 3 failed (rank 0 closed its end after seeing it fail"));
  pr.dev.free(buf);
}

TEST_CASE("cuda_ipc transport: routes from peer access, messages over both routes", "[cuda_ipc]") {
  // Devices 0 and 1 share a simulated NVLink island, device 4 does not: 0<->1 p2p, the rest
  // host staging through pinned shared memory.
  constexpr int kRanks = 3;
  const int devices[kRanks] = {0, 1, 4};
  for (const std::size_t slot : {kDefaultSlotBytes, 16 * kSlotAlign}) {  // both routes cut alike
    INFO("slot bytes " << slot);
    auto store = std::make_shared<bootstrap::InMemoryStore>();
    const std::string prefix = fmt::format("t{}/", slot);
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> threads;
    threads.reserve(kRanks);
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        std::string& err = errors[static_cast<std::size_t>(r)];
        try {
          device::Device& dev = device::host_sim();
          throw_if_error(dev.set_device(devices[r]));
          CudaIpcSetup s{&dev, store, prefix, 0x77, r, kRanks, "host-a", true, {}};
          s.slot_bytes = slot;
          auto t = value_or_throw(CudaIpcTransport::create(s, soon()));
          if (!t) {
            err = "not created";
            return;
          }
          for (int q = 0; q < kRanks; ++q) {
            auto want = q == r                               ? device::PeerRoute::Self
                        : (devices[q] / 4 == devices[r] / 4) ? device::PeerRoute::PeerToPeer
                                                             : device::PeerRoute::HostStaging;
            if (t->route(q) != want)
              err += fmt::format("route to {} is {}; ", q, device::to_string(t->route(q)));
          }
          std::vector<int> peers;
          for (int q = 0; q < kRanks; ++q)
            if (q != r) peers.push_back(q);
          throw_if_error(t->ensure(peers, soon()));
          // Everyone sends its rank-stamped bytes to everyone.
          const std::size_t n = 3 * slot + 17;
          std::vector<void*> bufs;
          std::vector<std::pair<Connection*, Request>> reqs;
          void* src = on_device(dev, pattern(n, static_cast<std::uint8_t>(r)));
          for (int q : peers) {
            Connection* c = t->get(q);
            reqs.emplace_back(c, value_or_throw(c->isend({src, n, nullptr}, 0, n, tag_of(1, n))));
            bufs.push_back(on_device(dev, std::vector<std::uint8_t>(n, 0)));
            reqs.emplace_back(
                c, value_or_throw(c->irecv({bufs.back(), n, nullptr}, 0, n, tag_of(1, n))));
          }
          const Deadline d = soon();
          for (auto& [c, req] : reqs)
            while (!value_or_throw(c->test(req)))
              if (d.expired()) throw std::runtime_error("timed out");
          for (std::size_t i = 0; i < peers.size(); ++i)
            if (std::memcmp(bufs[i], pattern(n, static_cast<std::uint8_t>(peers[i])).data(), n) !=
                0)
              err += fmt::format("wrong bytes from {}; ", peers[i]);
          for (void* b : bufs) dev.free(b);
          dev.free(src);
        } catch (const std::exception& e) {
          err += e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      INFO("rank " << r << ": " << errors[static_cast<std::size_t>(r)]);
      CHECK(errors[static_cast<std::size_t>(r)].empty());
    }
  }
}

TEST_CASE("cuda_ipc transport: LOOM_CUDA_IPC_ROUTE=staged on one rank stages the pair",
          "[cuda_ipc]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  const auto errors = on_two_ranks([&](int r) {
    std::string err;
    device::Device& dev = device::host_sim();
    CudaIpcSetup s{&dev, store, "st/", 0x7b, r, 2, "host-a", true, {}};
    s.stages = r == 1;  // p2p unless asked to stage
    auto t = value_or_throw(CudaIpcTransport::create(s, soon()));
    if (t->route(1 - r) != device::PeerRoute::HostStaging)
      err += fmt::format("route {}; ", device::to_string(t->route(1 - r)));
    throw_if_error(t->ensure({1 - r}, soon()));
    const std::size_t n = 2 * kDefaultSlotBytes + 5;
    void* src = on_device(dev, pattern(n, static_cast<std::uint8_t>(r)));
    void* dst = on_device(dev, std::vector<std::uint8_t>(n, 0));
    Connection* c = t->get(1 - r);
    Request sr = value_or_throw(c->isend({src, n, nullptr}, 0, n, tag_of(2, n)));
    Request rr = value_or_throw(c->irecv({dst, n, nullptr}, 0, n, tag_of(2, n)));
    const Deadline d = soon();
    for (Request q : {sr, rr})
      while (!value_or_throw(c->test(q)))
        if (d.expired()) throw std::runtime_error("timed out");
    if (std::memcmp(dst, pattern(n, static_cast<std::uint8_t>(1 - r)).data(), n) != 0)
      err += "wrong bytes; ";
    dev.free(src);
    dev.free(dst);
    return err;
  });
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
}

TEST_CASE("cuda_ipc transport: slot sizes that differ between ranks fail naming both",
          "[cuda_ipc]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  const auto errors = on_two_ranks([&](int r) {
    CudaIpcSetup s{&device::host_sim(), store, "m/", 0x79, r, 2, "host-a", true, {}};
    s.slot_bytes = r == 0 ? kDefaultSlotBytes : 2 * kDefaultSlotBytes;  // the p2p route
    auto t = value_or_throw(CudaIpcTransport::create(s, soon()));
    Status st = t->ensure({1 - r}, soon());
    return st.is_ok()
               ? std::string("ok")
               : (st.code() == ErrorCode::Mismatch ? "Mismatch: " : "other: ") + st.message();
  });
  CHECK_THAT(errors[0], Catch::Contains("Mismatch") && Catch::Contains("rank 0: rank 1's") &&
                            Catch::Contains("2097152 bytes, this rank's 1048576"));
  CHECK_THAT(errors[1],
             Catch::Contains("rank 1: rank 0's") && Catch::Contains("LOOM_CUDA_IPC_SLOT_SIZE"));
  CudaIpcSetup bad{&device::host_sim(), store, "b/", 0x7a, 0, 2, "host-a", true, {}};
  bad.slot_bytes = kSlotAlign + 1;
  auto t = CudaIpcTransport::create(bad, soon());
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().code() == ErrorCode::InvalidArgument);
}

TEST_CASE("cuda_ipc transport: one rank excluding it turns it off on every rank", "[cuda_ipc]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<int> created(2, -1);
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      CudaIpcSetup s{&device::host_sim(), store, "x/", 0x78, r, 2, "host-a", r == 0, {}};
      auto t = CudaIpcTransport::create(s, soon());
      created[static_cast<std::size_t>(r)] = !t.is_ok() ? -2 : *t ? 1 : 0;
    });
  for (auto& t : threads) t.join();
  CHECK(created == std::vector<int>{0, 0});
}

TEST_CASE("cuda_ipc: LOOM_TRANSPORTS entries", "[cuda_ipc][transports]") {
  using detail::cuda_ipc_allowed;
  using K = detail::TransportKind;
  CHECK(cuda_ipc_allowed("").value());
  CHECK(cuda_ipc_allowed("^shm").value());
  CHECK_FALSE(cuda_ipc_allowed("^cuda_ipc").value());
  CHECK_FALSE(cuda_ipc_allowed("tcp,shm").value());  // a list that does not name it
  CHECK(cuda_ipc_allowed("cuda_ipc,shm").value());
  CHECK_FALSE(cuda_ipc_allowed("cuda_ipc,^cuda_ipc").value());
  CHECK_FALSE(cuda_ipc_allowed("nvlink").is_ok());
  // cuda_ipc never enters the host transports' list.
  CHECK(detail::parse_transport_list("cuda_ipc,tcp").value() == std::vector<K>{K::Tcp});
  CHECK(detail::parse_transport_list("^cuda_ipc").value() ==
        std::vector<K>{K::Shm, K::Ofi, K::Tcp});
}
