#include "launch/job_secret.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/crypto.hpp"
#include "log/log.hpp"

namespace loom::launch {
namespace {

constexpr std::size_t kHexDigits = 32;  // 128 bits
constexpr std::size_t kMaxHexDigits = 64;
constexpr char kHex[] = "0123456789abcdef";

bool all_hex(std::string_view s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  std::string out;
  for (std::uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

// 128 bits of HMAC-SHA256 keyed with `key`'s first 16 bytes over `what` (domain-separated).
std::string derive(std::string_view key_hex, std::string_view domain, std::string_view what) {
  crypto::Secret key{};
  for (std::size_t i = 0; i < key.size() && 2 * i + 1 < key_hex.size(); ++i) {
    auto nib = [](char c) {
      return static_cast<std::uint8_t>(std::isdigit(static_cast<unsigned char>(c))
                                           ? c - '0'
                                           : std::tolower(static_cast<unsigned char>(c)) - 'a' +
                                                 10);
    };
    key[i] = static_cast<std::uint8_t>(nib(key_hex[2 * i]) << 4 | nib(key_hex[2 * i + 1]));
  }
  crypto::Nonce zero{};
  crypto::Mac mac = crypto::prove(
      key, domain, zero, {reinterpret_cast<const std::uint8_t*>(what.data()), what.size()});
  return to_hex(std::span(mac).first(16));
}

Result<std::string> explicit_secret(std::string_view hex) {
  if (hex.size() < kHexDigits || hex.size() > kMaxHexDigits || !all_hex(hex))
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_SECRET must be {} to {} hex digits ({} to {} bits; it has {} "
                      "characters): a shorter secret can be guessed. Make one with `openssl rand "
                      "-hex 16`, or unset LOOM_SECRET to use the secret file",
                      kHexDigits, kMaxHexDigits, 4 * kHexDigits, 4 * kMaxHexDigits, hex.size());
  if (hex.size() == kHexDigits) return std::string(hex);
  // The second half keys the hash, the whole is hashed: every digit counts.
  return derive(hex.substr(kHexDigits), "loom-long-secret-v1", hex);
}

void warn_unauthenticated_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    LOOM_LOG_WARN(Init,
                  "this job runs WITHOUT a secret (LOOM_SECRET_FILE=none): any process that can "
                  "reach its ports can join it, read its ranks' addresses and settings, and "
                  "disturb it. Set LOOM_SECRET (32 hex digits) or use the secret file");
  });
}

Status refuse(const std::string& path, const std::string& why) {
  return make_error(ErrorCode::InvalidUsage,
                    "the job secret file {} {}; fix it, point LOOM_SECRET_FILE elsewhere, or set "
                    "LOOM_SECRET",
                    path, why);
}

Result<std::string> read_secret(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return system_error(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return refuse(path, "is not a regular file");
  if (st.st_uid != ::geteuid())
    return refuse(path,
                  fmt::format("belongs to uid {}, not to this user ({})", st.st_uid, ::geteuid()));
  if ((st.st_mode & 077) != 0)
    return refuse(path, fmt::format("may be read by others (mode {:04o}; it must be 0600)",
                                    st.st_mode & 0777));
  std::array<char, kHexDigits + 2> buf{};
  ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
  if (n < 0) return system_error(errno, "read " + path);
  std::string_view text(buf.data(), static_cast<std::size_t>(n));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  if (text.size() != kHexDigits || !all_hex(text))
    return refuse(path, fmt::format("does not hold {} hex digits", kHexDigits));
  return std::string(text);
}

Status make_parent_dirs(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    const std::string dir = path.substr(0, at);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return system_error(errno, "create directory " + dir + " for the job secret file");
  }
  return Status::ok();
}

// Writes a fresh secret to a private temporary file and links it into place: of ranks that
// start together, the first link wins and everyone reads the winner's secret.
Status create_secret_file(const std::string& path) {
  LOOM_RETURN_IF_ERROR(make_parent_dirs(path));
  std::array<std::uint8_t, kHexDigits / 2> raw{};
  LOOM_RETURN_IF_ERROR(crypto::random_bytes(raw));
  const std::string text = to_hex(raw) + "\n";
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return system_error(errno, "create " + tmp);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  const int err = errno;
  Status st = ok ? Status::ok() : system_error(err, "write " + tmp);
  if (ok && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST)
    st = system_error(errno, "link " + tmp + " to " + path);
  ::unlink(tmp.c_str());
  if (st.is_ok()) LOOM_LOG_INFO(Init, "created the job secret file {}", path);
  return st;
}

}  // namespace

Result<std::string> read_or_create_secret_file(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      auto secret = read_secret(fd, path);
      ::close(fd);
      return secret;
    }
    if (errno == ELOOP) return refuse(path, "is a symbolic link");
    if (errno != ENOENT || attempt > 0) return system_error(errno, "open " + path);
    LOOM_RETURN_IF_ERROR(create_secret_file(path));
  }
  return make_error(ErrorCode::Internal, "unreachable");
}

Result<std::string> secret_file_path(const config::Config& cfg) {
  std::string path = cfg.get_string("LOOM_SECRET_FILE");
  if (!path.empty()) return path;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::array<char, 4096> buf{};
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr ||
      pw.pw_dir == nullptr || pw.pw_dir[0] != '/')
    return make_error(ErrorCode::InvalidUsage,
                      "uid {} has no home directory for the job secret file: set LOOM_SECRET or "
                      "LOOM_SECRET_FILE",
                      ::geteuid());
  return std::string(pw.pw_dir) + "/.config/loom/secret";
}

std::string job_identity(const config::Config& cfg, std::string_view launcher) {
  auto raw = [&](const char* name) { return cfg.has(name) ? cfg.raw(name) : std::string(); };
  if (launcher == "slurm" && cfg.has("SLURM_JOB_ID"))
    return fmt::format("slurm {}.{}", raw("SLURM_JOB_ID"), raw("SLURM_STEP_ID"));
  if (launcher == "torchrun" && cfg.has("TORCHELASTIC_RUN_ID"))
    return "torchrun " + raw("TORCHELASTIC_RUN_ID");
  if (launcher == "mpirun") {
    if (cfg.has("PMIX_NAMESPACE")) return "mpirun " + raw("PMIX_NAMESPACE");
    if (cfg.has("OMPI_MCA_ess_base_jobid")) return "mpirun " + raw("OMPI_MCA_ess_base_jobid");
  }
  return "";
}

Result<std::string> job_secret(const config::Config& cfg, std::string_view launcher) {
  if (cfg.has("LOOM_SECRET")) return explicit_secret(cfg.get_string("LOOM_SECRET"));
  if (cfg.get_string("LOOM_SECRET_FILE") == "none") {
    warn_unauthenticated_once();
    return std::string();
  }
  LOOM_ASSIGN_OR_RETURN(std::string path, secret_file_path(cfg));
  auto secret = read_or_create_secret_file(path);
  if (!secret.is_ok())
    return secret.status().with_context("finding the job's secret (LOOM_SECRET is unset)");
  const std::string job = job_identity(cfg, launcher);
  return job.empty() ? *secret : derive(*secret, "loom-job-secret-v1", job);
}

}  // namespace loom::launch
