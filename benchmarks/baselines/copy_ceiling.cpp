// copy-ceiling: what one host's memory system allows a collective, measured the way loom-perf
// measures the collective. N threads, one per rank, each make exactly the copies that a
// single-copy shared-memory implementation must make for the collective (every byte that ends
// in a rank's receive buffer is copied once, from the rank that holds it, all ranks at once),
// with nothing else: no messages, no synchronisation but one barrier before and one after each
// iteration (spinning, then yielding the CPU: a sleeping barrier's wake-ups would dominate small
// sizes). Its busbw is therefore an upper bound for loom's and Open MPI's busbw on the same
// host at the same rank count: the "copy ceiling" of benchmarks/compare.py --baselines copy.
//
//   copy-ceiling alltoall --ranks 4 -b 64K -e 16M -f 4 -n 50 -w 10
//
// COLL: alltoall (rank r copies block r of every rank's send buffer into block p of its own
// receive buffer), sendrecv (rank r copies rank r-1's whole send buffer, as loom-perf's
// sendrecv ring), gather (each rank copies its block into the root's receive buffer), scatter
// (each rank copies its block out of the root's send buffer). SIZE, count and busbw as in
// loom-perf (alltoall, gather, scatter: algbw x (n-1)/n; sendrecv: algbw). Out of place only:
// the in-place columns print N/A. Every element of every receive buffer is checked after each
// size (#wrong). With at most one rank per core, thread r is bound to core r (as mpirun and
// loomrun bind such ranks); with more ranks than cores, threads are not bound (as mpirun
// --oversubscribe and compare.py's loomrun --cpu-bind none leave ranks). Exit status: 0 all checks
// passed, 1 wrong results, 2 usage error, 3 other error.
//
// --tcp (sendrecv only): the loopback TCP ceiling instead: rank r sends its buffer to rank r+1
// over one TCP connection on 127.0.0.1 (TCP_NODELAY, the kernel's default buffers) while it
// receives rank r-1's, one thread per rank polling both sockets: what plain sockets carry here.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "benchmarks/baselines/common.hpp"
#include "benchmarks/common/sweep.hpp"

namespace loom::baselines {
namespace {

enum class Coll { AllToAll, SendRecv, Gather, Scatter };

struct Args {
  Coll coll = Coll::AllToAll;
  std::string_view name;
  int nranks = 2;
  int root = 0;
  bool tcp = false;
  Options options;
};

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  void* p = std::aligned_alloc(4096, ((bytes + 4095) / 4096) * 4096 + 4096);
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(static_cast<std::byte*>(p));
}

// A sense-reversing barrier that spins (and yields once a wait grows long, for more ranks than
// cores) instead of sleeping.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const unsigned gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(gen + 1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins)
      if (spins > 2000) sched_yield();
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

void bind_to_core(int rank, int nranks) {
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores <= 0 || nranks > cores) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(rank, &set);
  (void)sched_setaffinity(0, sizeof(set), &set);
}

// One copy a rank makes: `bytes` from (rank `from_rank`'s send buffer + from_off) to (rank
// `to_rank`'s receive buffer + to_off).
struct Copy {
  int from_rank;
  std::size_t from_off;
  int to_rank;
  std::size_t to_off;
  std::size_t bytes;
};

// The copies rank r makes for one call of `block` bytes per rank (sendrecv: the whole message).
std::vector<Copy> copies_of(const Args& a, int r, std::size_t block) {
  const int n = a.nranks;
  std::vector<Copy> out;
  const auto off = [&](int i) { return static_cast<std::size_t>(i) * block; };
  switch (a.coll) {
    case Coll::AllToAll:
      for (int k = 0; k < n; ++k) {  // own block first, then pairwise order
        const int p = (r + k) % n;
        out.push_back({p, off(r), r, off(p), block});
      }
      break;
    case Coll::SendRecv: out.push_back({(r + n - 1) % n, 0, r, 0, block}); break;
    case Coll::Gather: out.push_back({r, 0, a.root, off(r), block}); break;
    case Coll::Scatter: out.push_back({a.root, off(r), r, 0, block}); break;
  }
  return out;
}

// Exact in fp32 and fp64: a small integer that differs between ranks and offsets.
double value_of(int rank, std::size_t index) {
  return static_cast<double>((index * 2654435761ULL + static_cast<std::uint64_t>(rank) * 40503ULL) %
                             65521ULL);
}

void put(Dtype d, std::byte* buf, std::size_t count, int rank, std::size_t first) {
  for (std::size_t i = 0; i < count; ++i) {
    if (d == Dtype::Float32)
      reinterpret_cast<float*>(buf)[i] = static_cast<float>(value_of(rank, first + i));
    else
      reinterpret_cast<double*>(buf)[i] = value_of(rank, first + i);
  }
}

std::uint64_t count_wrong(Dtype d, const std::byte* buf, std::size_t count, int rank,
                          std::size_t first) {
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double want = value_of(rank, first + i);
    const double got = d == Dtype::Float32
                           ? static_cast<double>(reinterpret_cast<const float*>(buf)[i])
                           : reinterpret_cast<const double*>(buf)[i];
    wrong += got != want ? 1 : 0;
  }
  return wrong;
}

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "copy-ceiling: {}: {}\n", what, std::strerror(errno));
  std::exit(3);
}

// Connections rank r -> rank r+1 over loopback TCP: out[r] sends, in[(r+1) % n] receives.
struct Ring {
  std::vector<int> out, in;
  explicit Ring(int n) {
    std::vector<int> listeners;
    std::vector<sockaddr_in> addrs(static_cast<std::size_t>(n));
    for (auto& a : addrs) {
      const int l = ::socket(AF_INET, SOCK_STREAM, 0);
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = 0;
      socklen_t len = sizeof(a);
      if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
          ::listen(l, 4) != 0 || ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        die("listening on 127.0.0.1");
      listeners.push_back(l);
    }
    for (int r = 0; r < n; ++r) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      const auto& to = addrs[static_cast<std::size_t>((r + 1) % n)];
      if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0)
        die("connecting on 127.0.0.1");
      out.push_back(fd);
    }
    in.resize(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {  // rank r+1 accepts rank r's connection
      const auto to = static_cast<std::size_t>((r + 1) % n);
      in[to] = ::accept(listeners[to], nullptr, nullptr);
      if (in[to] < 0) die("accepting on 127.0.0.1");
    }
    for (int l : listeners) ::close(l);
    const int one = 1;
    for (const auto* v : {&out, &in})
      for (int fd : *v) {
        (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      }
  }
  ~Ring() {
    for (const auto* v : {&out, &in})
      for (int fd : *v) ::close(fd);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

// Sends `bytes` of `src` on `out` while receiving `bytes` into `dst` from `in`.
void exchange(int out, int in, const std::byte* src, std::byte* dst, std::size_t bytes) {
  std::size_t sent = 0, got = 0;
  while (sent < bytes || got < bytes) {
    bool moved = false;
    if (sent < bytes) {
      const ssize_t k = ::send(out, src + sent, bytes - sent, MSG_NOSIGNAL);
      if (k > 0) {
        sent += static_cast<std::size_t>(k);
        moved = true;
      } else if (errno != EAGAIN) {
        die("send");
      }
    }
    if (got < bytes) {
      const ssize_t k = ::recv(in, dst + got, bytes - got, 0);
      if (k > 0) {
        got += static_cast<std::size_t>(k);
        moved = true;
      } else if (k == 0) {
        die("the peer closed its connection");
      } else if (errno != EAGAIN) {
        die("recv");
      }
    }
    if (moved) continue;
    pollfd fds[2] = {{out, static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {in, static_cast<short>(got < bytes ? POLLIN : 0), 0}};
    if (::poll(fds, 2, 60000) <= 0) die("no progress for 60 s");
  }
}

class Ceiling {
 public:
  explicit Ceiling(const Args& a) : a_(a), sync_(a.nranks) {
    if (a.tcp) ring_ = std::make_unique<Ring>(a.nranks);
  }

  // One size: every rank's buffers (allocated and filled by its own thread), warm-up and timed
  // iterations, then the check. Returns the out-of-place half.
  Half run(Dtype d, std::size_t block_count) {
    const std::size_t dsize = dtype_size(d);
    const std::size_t block = block_count * dsize;
    const std::size_t total = a_.coll == Coll::SendRecv ? block : block * nranks();
    send_.resize(static_cast<std::size_t>(nranks()));
    recv_.resize(send_.size());
    wrong_.assign(send_.size(), 0);
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(nranks()));
    double seconds = 0;
    for (int r = 0; r < nranks(); ++r)
      threads.emplace_back([&, r] { rank_main(r, d, block, total, r == 0 ? &seconds : nullptr); });
    for (auto& t : threads) t.join();
    Half h;
    h.ran = true;
    h.checked = true;
    h.seconds = seconds;
    for (std::uint64_t w : wrong_) h.wrong += w;
    h.algbw = seconds > 0 ? static_cast<double>(total) / seconds / 1e9 : 0;
    const double n = nranks();
    h.busbw = a_.coll == Coll::SendRecv ? h.algbw : h.algbw * (n - 1) / n;
    return h;
  }

 private:
  [[nodiscard]] int nranks() const { return a_.nranks; }

  void rank_main(int r, Dtype d, std::size_t block, std::size_t total, double* seconds) {
    const auto i = static_cast<std::size_t>(r);
    bind_to_core(r, nranks());
    send_[i] = allocate(total);
    recv_[i] = allocate(total);
    const std::size_t dsize = dtype_size(d);
    put(d, send_[i].get(), total / dsize, r, 0);
    std::memset(recv_[i].get(), 0xff, total);
    const std::vector<Copy> mine = copies_of(a_, r, block);
    sync_.arrive_and_wait();  // every buffer exists
    const int iters = a_.options.iters, warmup = a_.options.warmup;
    std::chrono::steady_clock::time_point t0;
    for (int it = 0; it < warmup + iters; ++it) {
      if (it == warmup) t0 = std::chrono::steady_clock::now();
      sync_.arrive_and_wait();
      if (ring_)
        exchange(ring_->out[i], ring_->in[i], send_[i].get(), recv_[i].get(), total);
      else
        for (const Copy& c : mine)
          std::memcpy(recv_[static_cast<std::size_t>(c.to_rank)].get() + c.to_off,
                      send_[static_cast<std::size_t>(c.from_rank)].get() + c.from_off, c.bytes);
      sync_.arrive_and_wait();
    }
    if (seconds != nullptr)
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                 std::max(iters, 1);
    std::uint64_t wrong = 0;
    for (const Copy& c : mine)
      wrong += count_wrong(d, recv_[static_cast<std::size_t>(c.to_rank)].get() + c.to_off,
                           c.bytes / dsize, c.from_rank, c.from_off / dsize);
    wrong_[i] = wrong;
    sync_.arrive_and_wait();  // nobody frees a buffer another rank still reads
    send_[i].reset();
    recv_[i].reset();
  }

  const Args& a_;
  SpinBarrier sync_;
  std::unique_ptr<Ring> ring_;  // --tcp
  std::vector<Buffer> send_, recv_;
  std::vector<std::uint64_t> wrong_;
};

// A --ranks or --root value, at most 4096 (a thread each).
int count_value(std::string_view flag, const char* value, int min) {
  return static_cast<int>(bench::int_value<UsageError>(flag, value, min, 4096));
}

// COLLECTIVE first, then --ranks N, -r/--root N and the baseline flags (parse_options).
Args parse_args(int argc, char** argv) {
  if (argc < 2) throw UsageError("missing COLLECTIVE");
  Args a;
  a.name = argv[1];
  if (a.name == "alltoall")
    a.coll = Coll::AllToAll;
  else if (a.name == "sendrecv")
    a.coll = Coll::SendRecv;
  else if (a.name == "gather")
    a.coll = Coll::Gather;
  else if (a.name == "scatter")
    a.coll = Coll::Scatter;
  else
    throw UsageError(fmt::format("unknown collective '{}'", a.name));
  std::vector<const char*> rest{argv[0], "--outofplace-only"};
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--tcp") {
      a.tcp = true;
      continue;
    }
    const bool ranks = arg == "--ranks" || arg == "-p", root = arg == "-r" || arg == "--root";
    if ((ranks || root) && i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", arg));
    if (ranks)
      a.nranks = count_value(arg, argv[++i], 1);
    else if (root)
      a.root = count_value(arg, argv[++i], 0);
    else
      rest.push_back(argv[i]);
  }
  if (a.root >= a.nranks) throw UsageError("the root must be below --ranks");
  if (a.tcp && (a.coll != Coll::SendRecv || a.nranks < 2))
    throw UsageError("--tcp is for sendrecv on 2 or more ranks");
  a.options = parse_options(static_cast<int>(rest.size()), rest.data(), false);
  return a;
}

int run(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.options.help) {
    fmt::print("{}", usage_text("copy-ceiling COLLECTIVE --ranks N [-r ROOT] [--tcp]", false));
    return 0;
  }
  std::vector<RankRecord> ranks;
  ranks.reserve(static_cast<std::size_t>(a.nranks));
  for (int r = 0; r < a.nranks; ++r) ranks.push_back(my_rank_record(r));
  print_header(a.options,
               TableTitle{"copy-ceiling",
                          a.tcp ? "loopback TCP only, one thread per rank"
                                : "memcpy only, one thread per rank",
                          std::string(a.name), "none",
                          a.coll == Coll::Gather || a.coll == Coll::Scatter ? a.root : -1},
               ranks);
  Ceiling ceiling(a);
  std::uint64_t total_wrong = 0;
  const std::size_t per = a.coll == Coll::SendRecv ? 1 : static_cast<std::size_t>(a.nranks);
  for (const Dtype d : a.options.dtypes) {
    for (const std::size_t size : size_list(a.options)) {
      const std::size_t block_count = size / dtype_size(d) / per;
      if (block_count == 0) continue;
      const Half h = ceiling.run(d, block_count);
      total_wrong += h.wrong;
      fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", block_count * per * dtype_size(d),
                 block_count, dtype_name(d), "none", -1, format_half(h), format_half(Half{}));
      std::fflush(stdout);
    }
  }
  fmt::print("# Out of bounds values : {} {}\n#\n", total_wrong, total_wrong ? "FAILED" : "OK");
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace loom::baselines

int main(int argc, char** argv) {
  try {
    return loom::baselines::run(argc, argv);
  } catch (const loom::baselines::UsageError& e) {
    fmt::print(
        stderr, "copy-ceiling: {}\n{}", e.what(),
        loom::baselines::usage_text("copy-ceiling COLLECTIVE --ranks N [-r ROOT] [--tcp]", false));
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "copy-ceiling: {}\n", e.what());
    return 3;
  }
}
