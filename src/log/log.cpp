#include "log/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>
#include <mutex>
#include <string>

#include "common/diag.hpp"

namespace loom::log {
namespace {

constexpr const char* kPattern = "[%H:%M:%S.%e] [pid %P] %n %l: %v";

constexpr std::array<const char*, kNumSubsys> kNames = {
    "INIT", "BOOTSTRAP", "COLL", "NET", "EXEC", "CONFIG", "SHM", "TOPO", "CUDA"};

struct Loggers {
  std::array<std::shared_ptr<spdlog::logger>, kNumSubsys> by_subsys;
  bool configured = false;
  std::mutex mu;
};

Loggers& loggers() {
  static Loggers* l = [] {
    auto* out = new Loggers();  // never destroyed: logging works during static destruction
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    for (int i = 0; i < kNumSubsys; ++i) {
      out->by_subsys[static_cast<std::size_t>(i)] = std::make_shared<spdlog::logger>(
          std::string("loom.") + kNames[static_cast<std::size_t>(i)], sink);
      out->by_subsys[static_cast<std::size_t>(i)]->set_level(spdlog::level::warn);
      out->by_subsys[static_cast<std::size_t>(i)]->set_pattern(kPattern);
    }
    return out;
  }();
  return *l;
}

spdlog::level::level_enum parse_level(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "OFF" || s == "NONE") return spdlog::level::off;
  if (s == "ERROR") return spdlog::level::err;
  if (s == "INFO") return spdlog::level::info;
  if (s == "DEBUG") return spdlog::level::debug;
  if (s == "TRACE") return spdlog::level::trace;
  return spdlog::level::warn;
}

// "ALL", "INIT,COLL", "ALL,^NET" -> enabled flags.
std::array<bool, kNumSubsys> parse_subsys(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::array<bool, kNumSubsys> on{};
  bool any_positive = false;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string tok = s.substr(pos, end - pos);
    pos = end + 1;
    bool exclude = !tok.empty() && tok[0] == '^';
    if (exclude) tok.erase(0, 1);
    if (!exclude) any_positive = true;
    for (int i = 0; i < kNumSubsys; ++i)
      if (tok == "ALL" || tok == kNames[static_cast<std::size_t>(i)])
        on[static_cast<std::size_t>(i)] = !exclude;
    if (exclude && !any_positive) {
      // "^NET" alone means everything but NET.
      for (int i = 0; i < kNumSubsys; ++i)
        if (tok != kNames[static_cast<std::size_t>(i)]) on[static_cast<std::size_t>(i)] = true;
      any_positive = true;
    }
  }
  return on;
}

std::string expand_path(std::string p) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  for (std::size_t i; (i = p.find("%h")) != std::string::npos;) p.replace(i, 2, host);
  for (std::size_t i; (i = p.find("%p")) != std::string::npos;)
    p.replace(i, 2, std::to_string(::getpid()));
  return p;
}

// The sink of LOOM_DEBUG_FILE, or why the file cannot be written. Its first line is written and
// flushed at once: a file that opens but takes no bytes (a full disk, /dev/full) would lose
// every line without a word.
Result<spdlog::sink_ptr> open_file_sink(const std::string& setting) {
  const std::string path = expand_path(setting);
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
    sink->set_pattern(kPattern);
    const std::string line = fmt::format("logging to {} (LOOM_DEBUG_FILE={})", path, setting);
    sink->log(spdlog::details::log_msg("loom.INIT", spdlog::level::info, line));
    sink->flush();
    return spdlog::sink_ptr(std::move(sink));
  } catch (const spdlog::spdlog_ex& e) {  // its message names the file and errno's text
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_DEBUG_FILE='{}': cannot write the log file {} ({}); fix the path or "
                      "unset LOOM_DEBUG_FILE to log to stderr",
                      setting, path, e.what());
  }
}

// common's diagnostic lines (socket, crypto) go to the NET logger at their level.
spdlog::level::level_enum net_level(diag::Level lv) {
  return lv == diag::Level::Debug ? spdlog::level::debug : spdlog::level::err;
}
const bool kDiagSinkInstalled = [] {
  diag::set_sink({[](diag::Level lv) { return get(Subsys::Net).should_log(net_level(lv)); },
                  [](diag::Level lv, std::string_view line) {
                    get(Subsys::Net).log(net_level(lv), "{}", line);
                  }});
  return true;
}();

}  // namespace

Status configure(const config::Config& cfg) {
  Loggers& l = loggers();
  std::lock_guard lock(l.mu);
  if (!l.configured) {
    std::string file = cfg.get_string("LOOM_DEBUG_FILE");
    if (!file.empty()) {
      LOOM_ASSIGN_OR_RETURN(spdlog::sink_ptr sink, open_file_sink(file));
      for (auto& lg : l.by_subsys) {
        lg->sinks().clear();
        lg->sinks().push_back(sink);
        lg->set_pattern(kPattern);
      }
    }
    l.configured = true;
  }
  auto level = parse_level(cfg.get_string("LOOM_DEBUG"));
  auto enabled = parse_subsys(cfg.get_string("LOOM_DEBUG_SUBSYS"));
  for (int i = 0; i < kNumSubsys; ++i) {
    auto idx = static_cast<std::size_t>(i);
    // Errors always reach the user, whatever the subsystem filter says.
    auto lv = enabled[idx] ? level : std::max(level, spdlog::level::err);
    l.by_subsys[idx]->set_level(lv);
    l.by_subsys[idx]->flush_on(spdlog::level::warn);
  }
  return Status::ok();
}

spdlog::logger& get(Subsys s) {
  return *loggers().by_subsys[static_cast<std::size_t>(s)];
}

}  // namespace loom::log
