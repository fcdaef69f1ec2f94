// loom-startup-sim: a simulated start-up of N ranks against the real rendezvous server, speaking
// the real protocol. The server runs in a child process (its own descriptor table); this process
// holds N lightweight clients (TcpStoreClient, driven by a few threads) that go through the
// store traffic of a communicator's creation: the hello, the four allgathers (cards, network
// devices, IPC peers, identities: each a SET and a GATHER per rank), the closing barrier, and
// the failure monitor's watch connection. It prints the requests the server
// served per rank, the rounds (request/answer exchanges) per rank, the bytes sent and the time.
//
//   loom-startup-sim N [value_bytes=16] [threads=8]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "common/socket.hpp"

namespace bs = loom::bootstrap;
using loom::Deadline;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kCommId = 0x5ca1e;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Runs fn(r) for every rank r on `threads` threads (rank r on thread r % threads).
template <typename Fn>
bool for_ranks(int n, int threads, Fn fn) {
  std::atomic<bool> ok{true};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int r = t; r < n && ok; r += threads)
        if (!fn(r)) ok = false;
    });
  for (auto& th : pool) th.join();
  return ok;
}

// The server's side: serves until the parent closes the pipe, then writes its load to it.
[[noreturn]] void serve(int n, int to_parent, int from_parent) {
  bs::ServerOptions o;
  o.members = n;
  auto bind = loom::net::resolve("127.0.0.1:0");
  auto server = bs::TcpStoreServer::start(bind.value(), kCommId, {}, o);
  if (!server.is_ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().message().c_str());
    std::_Exit(1);
  }
  const std::uint16_t port = server.value()->address().port();
  (void)::write(to_parent, &port, sizeof port);
  char c = 0;
  (void)::read(from_parent, &c, 1);  // the clients are done
  const bs::StoreLoad load = server.value()->load();
  (void)::write(to_parent, &load, sizeof load);
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: loom-startup-sim N [value_bytes=16] [threads=8]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const std::size_t value_bytes = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 16;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 8;
  int up[2];
  int down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) return 1;
  const pid_t child = ::fork();
  if (child == 0) serve(n, up[1], down[0]);
  std::uint16_t port = 0;
  if (::read(up[0], &port, sizeof port) != sizeof port) return 1;
  auto addr = loom::net::resolve("127.0.0.1:" + std::to_string(port)).value();

  // Two connections per rank in each process (the client and the monitor's watch link) may not
  // fit the descriptor limit: then each link says goodbye after its first watch (the server's
  // requests and rounds are the same; only the links it holds at the end are fewer).
  rlimit fds{};
  ::getrlimit(RLIMIT_NOFILE, &fds);
  const bool keep_links = 2 * static_cast<rlim_t>(n) + 256 <= fds.rlim_cur;
  if (!keep_links)
    std::fprintf(stderr,
                 "  %d ranks: each watch link closes after its first watch (fd limit %llu)\n", n,
                 static_cast<unsigned long long>(fds.rlim_cur));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<bs::TcpStoreClient>> clients(static_cast<std::size_t>(n));
  std::vector<std::shared_ptr<bs::Store>> links(static_cast<std::size_t>(n));
  std::vector<int> rounds(static_cast<std::size_t>(n), 0);
  auto fail = [](int r, const loom::Status& st) {
    std::fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
    return false;
  };
  bool ok = for_ranks(n, threads, [&](int r) {
    auto c = bs::TcpStoreClient::connect(addr, kCommId, r, Deadline::after(120s));
    if (!c.is_ok()) return fail(r, c.status());
    clients[static_cast<std::size_t>(r)] = std::move(c).value();
    ++rounds[static_cast<std::size_t>(r)];
    return true;
  });
  const double joined = seconds_since(start);
  const bs::Bytes value(value_bytes, 'x');
  // The four allgathers: every rank publishes, then every rank gathers (one parked request).
  for (const char* name : {"card", "netdev", "ipc", "ident"}) {
    const std::string prefix = std::string("sim/") + name;
    ok = ok && for_ranks(n, threads, [&](int r) {
           ++rounds[static_cast<std::size_t>(r)];
           auto st =
               clients[static_cast<std::size_t>(r)]->set(prefix + "/" + std::to_string(r), value);
           return st.is_ok() || fail(r, st);
         });
    ok = ok && for_ranks(n, threads, [&](int r) {
           ++rounds[static_cast<std::size_t>(r)];
           auto g = clients[static_cast<std::size_t>(r)]->gather(prefix, n, Deadline::after(600s));
           return g.is_ok() || fail(r, g.status());
         });
    std::fprintf(stderr, "  %s allgather done at %.2f s\n", name, seconds_since(start));
  }
  // The closing barrier (ADD, then GET of the done key), and the failure monitor's second
  // connection and first watch (answered: its wake key is set).
  ok = ok && for_ranks(n, threads, [&](int r) {
         auto& c = *clients[static_cast<std::size_t>(r)];
         auto a = c.add("sim/init/count", 1);
         if (!a.is_ok()) return fail(r, a.status());
         if (*a == n) (void)c.set("sim/init/done", value);
         rounds[static_cast<std::size_t>(r)] += *a == n ? 2 : 1;
         return true;
       });
  ok = ok && for_ranks(n, threads, [&](int r) {
         auto& c = *clients[static_cast<std::size_t>(r)];
         auto d = c.get("sim/init/done", Deadline::after(600s));
         auto link = c.watch_link(Deadline::after(120s));
         if (!d.is_ok()) return fail(r, d.status());
         if (!link.is_ok()) return fail(r, link.status());
         const std::string wake = "sim/wake/" + std::to_string(r);
         (void)c.set(wake, value);
         auto w = (*link)->watch({"sim/failure/1", wake}, Deadline::after(60s));
         if (keep_links) links[static_cast<std::size_t>(r)] = *link;  // else it says goodbye
         rounds[static_cast<std::size_t>(r)] += 4;
         return w.is_ok() || fail(r, w.status());
       });
  const double total = seconds_since(start);
  links.clear();
  clients.clear();
  (void)::write(down[1], "x", 1);
  bs::StoreLoad load{};
  const bool got = ::read(up[0], &load, sizeof load) == sizeof load;
  int status = 0;
  ::waitpid(child, &status, 0);
  int max_rounds = 0;
  for (int x : rounds) max_rounds = std::max(max_rounds, x);
  std::printf(
      "simulated start-up of %d ranks (%zu-byte values, real server and protocol): %s in %.2f s "
      "(join %.2f s); server: %llu requests (%.1f per rank), %llu gathers, %llu hellos, %.1f MiB "
      "sent; rounds per rank: %d\n",
      n, value_bytes, ok && got ? "ok" : "FAILED", total, joined,
      static_cast<unsigned long long>(load.requests), static_cast<double>(load.requests) / n,
      static_cast<unsigned long long>(load.gathers), static_cast<unsigned long long>(load.hellos),
      static_cast<double>(load.bytes_out) / (1 << 20), max_rounds);
  return ok && got ? 0 : 1;
}
