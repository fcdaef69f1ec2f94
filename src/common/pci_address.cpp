#include "common/pci_address.hpp"

#include <fmt/format.h>

#include <charconv>

namespace loom {
namespace {

// Hex digits of `text` up to `stop` (or its end when stop is 0) into `out`, at most `max`;
// advances `text` past them and `stop`.
bool hex_field(std::string_view& text, char stop, unsigned max, unsigned& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out, 16);
  if (ec != std::errc() || p == text.data() || out > max) return false;
  text.remove_prefix(static_cast<std::size_t>(p - text.data()));
  if (stop == 0) return text.empty();
  if (text.empty() || text.front() != stop) return false;
  text.remove_prefix(1);
  return true;
}

}  // namespace

std::string canonical_bus_id(std::string_view text) {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned dev = 0;
  unsigned func = 0;
  if (!hex_field(text, ':', 0xffff'ffff, domain) || !hex_field(text, ':', 0xff, bus) ||
      !hex_field(text, '.', 0x1f, dev) || !hex_field(text, 0, 0x7, func))
    return "";
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, func);
}

}  // namespace loom
