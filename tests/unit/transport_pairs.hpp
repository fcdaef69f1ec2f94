// Connected pairs of transport Connections for the conformance suite (fabtests style: the same
// tests run against every transport). Two ranks are two threads of this process; they meet in an
// InMemoryStore. Requests are driven like the executor drives them: test until nothing
// progresses, then prepare_wait() and poll(2) on the returned descriptors, with no timeout
// shorter than the test's deadline, so a lost wake-up fails the test instead of hiding.
#pragma once

#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "catch_threads.hpp"
#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "common/strings.hpp"
#include "transports/connection.hpp"
#include "transports/ofi/ofi_rails.hpp"
#include "transports/ofi/ofi_transport.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/shm/single_copy.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/transport.hpp"

namespace loom::test {

/// True if this process may use process_vm_readv at all (a seccomp filter may forbid it).
inline bool single_copy_works() {
  std::uint64_t from = 0x10ad, to = 0;
  return transport::shm::cma_read(::getpid(), &to, reinterpret_cast<std::uintptr_t>(&from),
                                  sizeof to, "self test")
             .is_ok() &&
         to == from;
}

/// "ofi:PROVIDER" is the ofi transport over that libfabric provider; it is listed only when the
/// provider exists on this host (Debian's libfabric1 ships tcp;ofi_rxm and shm);
/// "ofi-threaded:tcp;ofi_rxm" adds the ofi progress thread; "ofi-rails:tcp;ofi_rxm" is ofi over
/// two endpoints per rank (OfiRails: a StripedConnection over both, messages of 128 KiB or more
/// split). "tcp-striped"
/// is tcp over rails (3 loopback addresses at rank 0, 2 at rank 1: 6 sockets, from 5 asked,
/// paired rail by rail) with every message of 128 KiB or more striped across them in uneven
/// parts (64 KiB minimum); "tcp-threads" is tcp over 3 sockets served by 2 progress
/// threads.
inline const std::vector<std::string>& transport_kinds() {
  // shm-single-copy: shm with every message of 4 KiB or more sent as a single-copy descriptor (the
  // receiver reads the sender's buffer with process_vm_readv); left out where that is refused.
  // shm-reuse: shm whose senders put a message in the first slot whenever the channel is empty
  // (SlotOrder::Reuse, the default where ranks share CPUs). shm-named: shm over named /dev/shm
  // segments (LOOM_SHM_SEGMENTS=named, the fallback where memfd_create is refused).
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> k = {"tcp", "tcp-striped", "tcp-threads",
                                  "shm", "shm-reuse",   "shm-named"};
    if (single_copy_works()) k.emplace_back("shm-single-copy");
    for (const char* prov : {"tcp;ofi_rxm", "shm"})
      if (transport::ofi::probe_provider({prov, "127.0.0.1"}).is_ok())
        k.push_back(std::string("ofi:") + prov);
    if (transport::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
      k.emplace_back("ofi-threaded:tcp;ofi_rxm");
      k.emplace_back("ofi-rails:tcp;ofi_rxm");
    }
    // LOOM_TEST_SKIP_KINDS: kinds to leave out, comma-separated prefixes (the TSan run leaves
    // out ofi-threaded; see scripts/sanitize.sh).
    if (const char* skip = std::getenv("LOOM_TEST_SKIP_KINDS"); skip != nullptr) {
      for (std::string_view prefix : comma_tokens(skip))
        std::erase_if(k, [&](const std::string& kind) { return kind.rfind(prefix, 0) == 0; });
    }
    return k;
  }();
  return kinds;
}

/// The Connection::name() of a transport kind ("ofi:shm" -> "ofi").
inline std::string connection_name(const std::string& kind) {
  if (kind.rfind("ofi", 0) == 0) return "ofi";
  if (kind.rfind("tcp", 0) == 0) return "tcp";
  return kind.rfind("shm", 0) == 0 ? "shm" : kind;
}

inline std::uint64_t random_comm_id() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) | rd();
}

struct PairOptions {
  // Small rings by default, so messages span many slots and the rings wrap around often.
  // The slot path unless a test (or the shm-single-copy kind) asks for single copy.
  transport::shm::ShmOptions shm{16 << 10, 4, transport::shm::SingleCopy::Off};
  transport::tcp::TcpOptions tcp{};
};

/// Runs fn(0) and fn(1) on two threads and returns both results.
inline std::array<Status, 2> run_ranks(const std::function<Status(int)>& fn) {
  std::array<Status, 2> out;
  std::thread t([&] { out[1] = fn(1); });
  out[0] = fn(0);
  t.join();
  return out;
}

/// Two ranks' transports of one kind, connected to each other.
class TransportPair {
 public:
  static Result<std::unique_ptr<TransportPair>> create(const std::string& kind,
                                                       PairOptions options = {}) {
    std::unique_ptr<TransportPair> p(new TransportPair(kind));
    Deadline deadline = Deadline::after(std::chrono::seconds(20));
    if (kind == "tcp-striped") {
      options.tcp.sockets_per_peer = 5;
      options.tcp.stripe_min = 64u << 10;
    }
    if (options.tcp.progress_threads < 0) options.tcp.progress_threads = 0;  // same on any host
    if (kind == "tcp-threads") {
      options.tcp.sockets_per_peer = 3;
      options.tcp.progress_threads = 2;
    }
    if (kind.rfind("tcp", 0) == 0) {
      LOOM_RETURN_IF_ERROR(p->listen_tcp(options.tcp, kind == "tcp-striped"));
    } else if (kind.rfind("shm", 0) == 0) {
      if (kind == "shm-reuse") options.shm.slot_order = transport::shm::SlotOrder::Reuse;
      if (kind == "shm-named") options.shm.segments = transport::shm::SegmentKind::Named;
      if (kind == "shm-single-copy") {
        options.shm.single_copy = transport::shm::SingleCopy::On;
        options.shm.single_copy_min = 4096;  // smaller messages interleave on the slot path
      }
      for (int r = 0; r < 2; ++r) {
        LOOM_ASSIGN_OR_RETURN(p->shm_[r], transport::shm::ShmTransport::create(
                                              r, 2, p->comm_id_, p->store_, options.shm));
      }
    } else if (kind.rfind("ofi:", 0) == 0) {
      LOOM_RETURN_IF_ERROR(p->create_ofi(kind.substr(4), false));
    } else if (kind.rfind("ofi-rails:", 0) == 0) {
      LOOM_RETURN_IF_ERROR(p->create_ofi_rails(kind.substr(10)));
    } else if (kind.rfind("ofi-threaded:", 0) == 0) {
      LOOM_RETURN_IF_ERROR(p->create_ofi(kind.substr(13), true));
    } else {
      return make_error(ErrorCode::InvalidArgument, "unknown transport '{}'", kind);
    }
    auto st = run_ranks([&](int r) { return p->ensure(r, deadline); });
    LOOM_RETURN_IF_ERROR(st[0]);
    LOOM_RETURN_IF_ERROR(st[1]);
    return p;
  }

  [[nodiscard]] const std::string& kind() const { return kind_; }
  [[nodiscard]] std::uint64_t comm_id() const { return comm_id_; }
  /// `rank`'s transport, through the interface every transport implements.
  [[nodiscard]] transport::Transport& transport_of(int rank) const {
    auto r = static_cast<std::size_t>(rank);
    if (ofi_[r]) return *ofi_[r];
    if (ofi_rails_[r]) return *ofi_rails_[r];
    if (tcp_[r]) return *tcp_[r];
    return *shm_[r];
  }
  [[nodiscard]] transport::Connection& conn(int rank) const {
    return *transport_of(rank).get(1 - rank);
  }
  /// The ofi transport of `rank` (null for other kinds).
  [[nodiscard]] transport::ofi::OfiTransport* ofi(int rank) const {
    return ofi_[static_cast<std::size_t>(rank)].get();
  }
  /// Destroys `rank`'s transport, as if the rank went away.
  void destroy(int rank) {
    tcp_[static_cast<std::size_t>(rank)].reset();
    shm_[static_cast<std::size_t>(rank)].reset();
    ofi_[static_cast<std::size_t>(rank)].reset();
    ofi_rails_[static_cast<std::size_t>(rank)].reset();
  }

 private:
  explicit TransportPair(std::string kind)
      : kind_(std::move(kind)),
        comm_id_(random_comm_id()),
        store_(std::make_shared<bootstrap::InMemoryStore>()) {}

  // "tcp-striped" also runs over rails: loopback addresses stand in for NICs, 3 at rank 0
  // (127.0.0.1-3) and 2 at rank 1 (127.0.0.1 and .4), so its sockets pair rails unevenly.
  Status listen_tcp(transport::tcp::TcpOptions options, bool rails) {
    LOOM_ASSIGN_OR_RETURN(net::SocketAddress any, net::resolve("127.0.0.1:0"));
    const std::array<std::vector<const char*>, 2> extra = {
        std::vector<const char*>{"127.0.0.2:0", "127.0.0.3:0"},
        std::vector<const char*>{"127.0.0.4:0"}};
    std::vector<net::SocketAddress> addrs;
    std::vector<std::vector<net::SocketAddress>> card_rails;
    for (auto& t : tcp_) {
      const auto r = addrs.size();
      options.rails.clear();
      for (const char* a : rails ? extra[r] : std::vector<const char*>{}) {
        LOOM_ASSIGN_OR_RETURN(net::SocketAddress rail, net::resolve(a));
        options.rails.push_back(rail);
      }
      LOOM_ASSIGN_OR_RETURN(
          t, transport::tcp::TcpTransport::listen(static_cast<int>(r), 2, comm_id_, any, options));
      addrs.push_back(t->address());
      card_rails.push_back(t->card_rails());
    }
    for (auto& t : tcp_) {
      t->set_peer_addresses(addrs);
      if (rails) t->set_peer_rails(card_rails);
    }
    return Status::ok();
  }

  // Over libfabric's shm provider, buffers are registered even though it does not ask, so the
  // registration cache (which EFA needs) is exercised. (ofi_rxm over tcp mishandles a local
  // registration it did not ask for in rendezvous transfers: such runs stall.)
  Status create_ofi(const std::string& provider, bool thread) {
    transport::ofi::OfiOptions o;
    o.fabric = {provider, "127.0.0.1"};
    LOOM_ASSIGN_OR_RETURN(o.liveness_bind, net::resolve("127.0.0.1:0"));
    o.force_registration = provider == "shm";
    o.progress_thread = thread ? 1 : 0;
    for (int r = 0; r < 2; ++r) {
      LOOM_ASSIGN_OR_RETURN(ofi_[static_cast<std::size_t>(r)],
                            transport::ofi::OfiTransport::create(r, 2, comm_id_, store_, o));
    }
    return Status::ok();
  }

  // Two endpoints per rank on the loopback interface stand in for two NICs.
  Status create_ofi_rails(const std::string& provider) {
    for (int r = 0; r < 2; ++r) {
      std::vector<std::unique_ptr<transport::ofi::OfiTransport>> rails;
      for (int i = 0; i < 2; ++i) {
        transport::ofi::OfiOptions o;
        o.fabric = {provider, "127.0.0.1"};
        LOOM_ASSIGN_OR_RETURN(o.liveness_bind, net::resolve("127.0.0.1:0"));
        o.progress_thread = 0;
        o.rail = i;
        LOOM_ASSIGN_OR_RETURN(rails.emplace_back(),
                              transport::ofi::OfiTransport::create(r, 2, comm_id_, store_, o));
      }
      ofi_rails_[static_cast<std::size_t>(r)] =
          std::make_unique<transport::ofi::OfiRails>(std::move(rails), 2, 64u << 10);
    }
    return Status::ok();
  }

  Status ensure(int rank, Deadline deadline) {
    return transport_of(rank).ensure({1 - rank}, deadline);
  }

  std::string kind_;
  std::uint64_t comm_id_;
  std::shared_ptr<bootstrap::InMemoryStore> store_;
  std::array<std::unique_ptr<transport::tcp::TcpTransport>, 2> tcp_;
  std::array<std::unique_ptr<transport::shm::ShmTransport>, 2> shm_;
  std::array<std::unique_ptr<transport::ofi::OfiTransport>, 2> ofi_;
  std::array<std::unique_ptr<transport::ofi::OfiRails>, 2> ofi_rails_;
};

/// What the executor does when nothing progressed: prepare_wait(), then poll until woken or
/// `deadline`. Counts the polls in `*blocked` if given.
inline Status block(transport::Connection& c, Deadline deadline, std::size_t* blocked = nullptr) {
  std::vector<pollfd> fds;
  if (!c.prepare_wait(fds)) return Status::ok();
  if (fds.empty()) {
    std::this_thread::yield();
    return Status::ok();
  }
  if (blocked != nullptr) ++*blocked;
  if (::poll(fds.data(), fds.size(), deadline.poll_timeout_ms(3'600'000)) < 0 && errno != EINTR)
    return system_error(errno, "poll");
  return Status::ok();
}

/// A request-posting step for drive(): posts one request on the connection.
using PostFn = std::function<Result<transport::Request>()>;

/// Posts `posts` in order with at most `window` outstanding, tests them until every one has
/// completed, and blocks (see block()) whenever a round makes no progress. Returns the first
/// error, or Timeout at `deadline`.
inline Status drive(transport::Connection& c, const std::vector<PostFn>& posts, std::size_t window,
                    Deadline deadline, std::size_t* blocked = nullptr) {
  std::vector<transport::Request> inflight;
  std::size_t next = 0;
  while (next < posts.size() || !inflight.empty()) {
    bool progressed = false;
    while (next < posts.size() && inflight.size() < window) {
      LOOM_ASSIGN_OR_RETURN(transport::Request r, posts[next++]());
      inflight.push_back(r);
      progressed = true;
    }
    for (auto it = inflight.begin(); it != inflight.end();) {
      LOOM_ASSIGN_OR_RETURN(bool done, c.test(*it));
      it = done ? inflight.erase(it) : it + 1;
      progressed = progressed || done;
    }
    if (progressed || (next == posts.size() && inflight.empty())) continue;
    if (deadline.expired())
      return make_error(ErrorCode::Timeout, "{}: {} requests still pending at the deadline",
                        c.name(), inflight.size() + posts.size() - next);
    LOOM_RETURN_IF_ERROR(block(c, deadline, blocked));
  }
  return Status::ok();
}

/// Tests already-posted requests until all complete (see drive()).
inline Status wait_all(transport::Connection& c, const std::vector<transport::Request>& reqs,
                       Deadline deadline, std::size_t* blocked = nullptr) {
  std::vector<PostFn> posts;
  for (const auto& r : reqs) posts.emplace_back([r]() -> Result<transport::Request> { return r; });
  return drive(c, posts, posts.size(), deadline, blocked);
}

/// Entries of /dev/shm left by communicator `comm_id` ("loom-<comm_id hex>-...").
inline std::vector<std::string> shm_leftovers(std::uint64_t comm_id) {
  std::vector<std::string> out;
  std::string prefix = fmt::format("loom-{:016x}-", comm_id);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/dev/shm"), &::closedir);
  if (!dir) return out;
  while (dirent* e = ::readdir(dir.get()))
    if (std::string(e->d_name).rfind(prefix, 0) == 0) out.emplace_back(e->d_name);
  return out;
}

}  // namespace loom::test
