// UniqueId: 128 plain bytes naming a rendezvous server.
//
// Layout of to_bytes() (integers little-endian):
//   [0, 4)    magic "LMID"
//   [4, 6)    layout version (1)
//   [6]       flags: bit 0 = the rank-0 Communicator serves the rendezvous; other bits 0
//   [7]       length N of the root address (at most 96)
//   [8, 16)   communicator id
//   [16, 32)  secret
//   [32, 32+N) root address "host:port" (printable ASCII); the rest is zero
#include "loom/unique_id.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "bootstrap/tcp_store.hpp"
#include "common/socket.hpp"
#include "common/status.hpp"
#include "core/comm_setup.hpp"
#include "log/log.hpp"

namespace loom {
namespace {

constexpr std::array<std::uint8_t, 4> kMagic = {'L', 'M', 'I', 'D'};
constexpr std::uint16_t kLayoutVersion = 1;
constexpr std::size_t kRootOffset = 32;
constexpr std::size_t kMaxRoot = UniqueId::kBytes - kRootOffset;
constexpr std::uint8_t kFlagRank0Serves = 1;
constexpr char kHexDigits[] = "0123456789abcdef";

[[noreturn]] void throw_invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, what);
}

Status fill_random(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == ENOSYS) {
      break;  // very old kernel: fall back to /dev/urandom
    } else if (n < 0 && errno != EINTR) {
      return system_error(errno, "getrandom");
    }
  }
  if (done == out.size()) return Status::ok();
  net::Fd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return system_error(errno, "open /dev/urandom");
  while (done < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return system_error(n == 0 ? EIO : errno, "read /dev/urandom");
    }
  }
  return Status::ok();
}

// This host's first non-loopback IPv4 address that is up, else 127.0.0.1.
std::string default_host() {
  ifaddrs* list = nullptr;
  std::string out = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char host[INET_ADDRSTRLEN] = {0};
    const auto* in = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host) != nullptr) {
      out = host;
      break;
    }
  }
  ::freeifaddrs(list);
  return out;
}

bool is_wildcard(const net::SocketAddress& a) {
  if (a.family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == INADDR_ANY;
  }
  if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    return IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
  }
  return false;
}

Result<net::SocketAddress> bind_address_for(std::string_view bind) {
  if (bind.empty()) return net::resolve(default_host());
  if (bind.front() == ':') return net::resolve(default_host() + std::string(bind));
  return net::resolve(bind);
}

// The "host:port" clients should dial for a server bound to `bound`.
std::string advertised(const net::SocketAddress& bound) {
  if (!is_wildcard(bound)) return bound.to_string();
  auto addr = net::resolve(default_host());
  if (!addr.is_ok()) return bound.to_string();
  addr.value().set_port(bound.port());
  return addr.value().to_string();
}

// Servers started by UniqueId::create(). Each is owned here until a communicator of this process
// joins it; from then on its communicators own it (and wait for their peers before it goes, see
// comm_lifecycle.cpp), so a process that makes many ids (a group each) does not keep every
// server. A server no communicator of this process joins lives until the process exits.
struct ServerRegistry {
  struct Entry {
    std::uint64_t comm_id = 0;
    std::shared_ptr<bootstrap::TcpStoreServer> owned;  // until a communicator joins
    std::weak_ptr<bootstrap::TcpStoreServer> joined;   // after
  };
  std::mutex mu;
  std::vector<Entry> entries;
};

ServerRegistry& server_registry() {
  static ServerRegistry r;
  return r;
}

std::uint64_t fnv1a(std::span<const std::uint8_t> data, std::uint64_t h) {
  for (std::uint8_t b : data) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes hex into `out` (which must have exactly hex.size() / 2 bytes).
bool decode_hex(std::string_view hex, std::span<std::uint8_t> out) {
  if (hex.size() != out.size() * 2) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

void check_root_address(std::string_view root) {
  if (root.size() > kMaxRoot || !printable(root)) {
    throw_invalid(fmt::format(
        "rendezvous address '{}' is invalid (at most {} printable characters, no spaces)", root,
        kMaxRoot));
  }
  auto hp = net::parse_host_port(root);
  if (!hp.is_ok()) throw_invalid("rendezvous address: " + hp.status().message());
  if (!hp.value().has_port || hp.value().port == 0) {
    throw_invalid(fmt::format("rendezvous address '{}' needs a port (host:port)", root));
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

UniqueId UniqueId::create(std::string_view bind_address) {
  UniqueId id;
  throw_if_error(fill_random(id.secret_));
  while (id.comm_id_ == 0) {
    std::array<std::uint8_t, 8> raw{};
    throw_if_error(fill_random(raw));
    std::memcpy(&id.comm_id_, raw.data(), raw.size());
  }
  auto addr = bind_address_for(bind_address);
  if (!addr.is_ok()) {
    throw_if_error(addr.status().with_context(
        fmt::format("UniqueId::create: bind address '{}'", bind_address)));
  }
  auto cfg = config::Config::load();  // the server's limits; bad settings fail later, named
  auto server = bootstrap::TcpStoreServer::start(
      addr.value(), id.comm_id_, id.secret_,
      cfg.is_ok() ? detail::store_options(*cfg) : bootstrap::ServerOptions{});
  if (!server.is_ok()) throw_if_error(server.status().with_context("UniqueId::create"));
  id.root_ = advertised(server.value()->address());
  if (id.root_.size() > kMaxRoot) {
    throw_invalid(fmt::format("UniqueId::create: address '{}' is too long", id.root_));
  }
  id.rank0_serves_ = false;
  LOOM_LOG_INFO(Bootstrap, "UniqueId::create: rendezvous at {} (communicator id {:#x})", id.root_,
                id.comm_id_);
  ServerRegistry& reg = server_registry();
  std::lock_guard lock(reg.mu);
  std::erase_if(reg.entries, [](const auto& e) { return !e.owned && e.joined.expired(); });
  reg.entries.push_back({id.comm_id_, std::move(server).value(), {}});
  return id;
}

namespace detail {

std::shared_ptr<bootstrap::TcpStoreServer> store_served_here(std::uint64_t comm_id) {
  ServerRegistry& reg = server_registry();
  std::lock_guard lock(reg.mu);
  for (ServerRegistry::Entry& e : reg.entries) {
    if (e.comm_id != comm_id) continue;
    if (e.owned) {  // the first communicator to join takes it over
      e.joined = e.owned;
      return std::move(e.owned);
    }
    return e.joined.lock();
  }
  return nullptr;
}

}  // namespace detail

UniqueId UniqueId::for_root(std::string_view root_address, std::string_view secret) {
  check_root_address(root_address);
  UniqueId id;
  secret = trim(secret);
  if (secret.size() > 2 * id.secret_.size() || secret.size() % 2 != 0 ||
      !decode_hex(secret, std::span(id.secret_).first(secret.size() / 2))) {
    throw_invalid(fmt::format(
        "UniqueId::for_root: the secret must be an even number of hex digits, at most {}",
        2 * id.secret_.size()));
  }
  id.root_ = std::string(root_address);
  id.rank0_serves_ = true;
  std::string tag = "loom/for_root/v1";
  tag.push_back('\0');
  tag += id.root_;
  tag.push_back('\0');
  std::uint64_t h = fnv1a(std::span(reinterpret_cast<const std::uint8_t*>(tag.data()), tag.size()),
                          0xcbf29ce484222325ull);
  h = fnv1a(id.secret_, h);
  id.comm_id_ = h == 0 ? 1 : h;
  return id;
}

std::array<std::uint8_t, UniqueId::kBytes> UniqueId::to_bytes() const {
  std::array<std::uint8_t, kBytes> b{};
  std::copy(kMagic.begin(), kMagic.end(), b.begin());
  b[4] = static_cast<std::uint8_t>(kLayoutVersion & 0xff);
  b[5] = static_cast<std::uint8_t>(kLayoutVersion >> 8);
  b[6] = rank0_serves_ ? kFlagRank0Serves : 0;
  const std::size_t n = std::min(root_.size(), kMaxRoot);  // constructors keep root_ short
  b[7] = static_cast<std::uint8_t>(n);
  for (int i = 0; i < 8; ++i) b[8 + i] = static_cast<std::uint8_t>(comm_id_ >> (8 * i));
  std::copy(secret_.begin(), secret_.end(), b.begin() + 16);
  std::copy_n(root_.begin(), n, b.begin() + kRootOffset);
  return b;
}

UniqueId UniqueId::from_bytes(const std::array<std::uint8_t, kBytes>& b) {
  if (!std::equal(kMagic.begin(), kMagic.end(), b.begin())) {
    throw_invalid("UniqueId: not a loom unique id (bad magic)");
  }
  const unsigned version = b[4] | (b[5] << 8);
  if (version != kLayoutVersion) {
    throw_invalid(fmt::format("UniqueId: unsupported layout version {} (expected {})", version,
                              kLayoutVersion));
  }
  if ((b[6] & ~kFlagRank0Serves) != 0) throw_invalid("UniqueId: unknown flags");
  const std::size_t n = b[7];
  if (n > kMaxRoot) throw_invalid("UniqueId: root address length out of range");
  if (std::any_of(b.begin() + kRootOffset + n, b.end(), [](std::uint8_t x) { return x != 0; })) {
    throw_invalid("UniqueId: non-zero padding");
  }
  UniqueId id;
  id.root_.assign(b.begin() + kRootOffset, b.begin() + kRootOffset + n);
  if (!printable(id.root_)) throw_invalid("UniqueId: root address is not printable");
  for (int i = 7; i >= 0; --i) id.comm_id_ = (id.comm_id_ << 8) | b[8 + i];
  std::copy_n(b.begin() + 16, id.secret_.size(), id.secret_.begin());
  id.rank0_serves_ = (b[6] & kFlagRank0Serves) != 0;
  return id;
}

std::string UniqueId::to_string() const {
  std::string out;
  out.reserve(2 * kBytes);
  for (std::uint8_t x : to_bytes()) {
    out.push_back(kHexDigits[x >> 4]);
    out.push_back(kHexDigits[x & 15]);
  }
  return out;
}

UniqueId UniqueId::from_string(std::string_view hex) {
  hex = trim(hex);
  std::array<std::uint8_t, kBytes> b{};
  if (!decode_hex(hex, b)) {
    throw_invalid(
        fmt::format("UniqueId: expected {} hex digits, got '{}'", 2 * kBytes, hex.substr(0, 40)));
  }
  return from_bytes(b);
}

}  // namespace loom
