#include "device/nvlink.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom::device {

namespace {

bool on_switch(const std::vector<NvLink>& links) {
  return std::any_of(links.begin(), links.end(),
                     [](const NvLink& l) { return l.active && l.remote_is_switch; });
}

}  // namespace

std::string classify_link(const std::vector<NvLink>& links_of_a, std::string_view bus_id_of_b,
                          const std::vector<NvLink>& links_of_b) {
  const std::string b = canonical_bus_id(bus_id_of_b);
  const auto direct = std::count_if(links_of_a.begin(), links_of_a.end(), [&](const NvLink& l) {
    return l.active && !l.remote_is_switch && !b.empty() && l.remote_bus_id == b;
  });
  if (direct > 0) return fmt::format("nvlink x{}", direct);
  if (on_switch(links_of_a) && on_switch(links_of_b)) return "nvlink (nvswitch)";
  return "pcie";
}

}  // namespace loom::device
