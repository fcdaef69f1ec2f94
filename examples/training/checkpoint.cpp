#include "checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace train {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'T', 'R', 'N', '1'};

std::uint64_t fnv(const std::vector<char>& b) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : b) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

void put(std::vector<char>& b, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  b.insert(b.end(), c, c + n);
}
void put_u64(std::vector<char>& b, std::uint64_t v) {
  put(b, &v, sizeof v);
}
void put_vec(std::vector<char>& b, const std::vector<float>& v) {
  put_u64(b, v.size());
  put(b, v.data(), v.size() * sizeof(float));
}

struct Reader {
  const std::vector<char>& b;
  const std::string& path;
  std::size_t pos = 0;
  void get(void* p, std::size_t n) {
    if (pos + n > b.size()) throw std::runtime_error("checkpoint " + path + " is truncated");
    std::memcpy(p, b.data() + pos, n);
    pos += n;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    get(&v, sizeof v);
    return v;
  }
  std::vector<float> vec() {
    std::uint64_t n = u64();
    if (n > (b.size() - pos) / sizeof(float))
      throw std::runtime_error("checkpoint " + path + " is truncated");
    std::vector<float> v(n);
    get(v.data(), n * sizeof(float));
    return v;
  }
};

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  std::vector<char> b;
  put(b, kMagic, sizeof kMagic);
  put_u64(b, c.step);
  put_u64(b, c.config_hash);
  put_u64(b, c.opt.t);
  put_vec(b, c.params);
  put_vec(b, c.opt.m);
  put_vec(b, c.opt.v);
  put_u64(b, fnv(b));
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", tmp);
  std::size_t done = 0;
  while (done < b.size()) {
    ssize_t n = ::write(fd, b.data() + done, b.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("cannot write", tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot fsync", tmp);
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename to", path);
}

std::optional<Checkpoint> load_checkpoint(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot open", path);
  }
  std::vector<char> b;
  char buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) b.insert(b.end(), buf, buf + n);
  std::fclose(f);
  if (b.size() < sizeof kMagic + 8 || std::memcmp(b.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error("checkpoint " + path + " is not a loom-train checkpoint");
  std::uint64_t stored = 0;
  std::memcpy(&stored, b.data() + b.size() - 8, 8);
  std::vector<char> body(b.begin(), b.end() - 8);
  if (fnv(body) != stored) throw std::runtime_error("checkpoint " + path + " is corrupt");
  Reader r{body, path, sizeof kMagic};
  Checkpoint c;
  c.step = r.u64();
  c.config_hash = r.u64();
  c.opt.t = r.u64();
  c.params = r.vec();
  c.opt.m = r.vec();
  c.opt.v = r.vec();
  return c;
}

}  // namespace train
