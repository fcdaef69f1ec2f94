#include "common/diag.hpp"

#include <atomic>

namespace loom::diag {
namespace {

std::atomic<bool (*)(Level)> g_enabled{nullptr};
std::atomic<void (*)(Level, std::string_view)> g_write{nullptr};

}  // namespace

void set_sink(Sink sink) {
  g_write.store(sink.write, std::memory_order_release);
  g_enabled.store(sink.enabled, std::memory_order_release);
}

bool enabled(Level level) {
  auto* f = g_enabled.load(std::memory_order_acquire);
  return f != nullptr && f(level);
}

void emit(Level level, std::string_view line) {
  if (auto* f = g_write.load(std::memory_order_acquire)) f(level, line);
}

}  // namespace loom::diag
