// How a message is split into parts that travel side by side (over a tcp connection's sockets,
// or over the rails of a StripedConnection). Both sides compute the split from the posted length,
// so they agree on it without telling each other.
#pragma once

#include <algorithm>
#include <cstddef>

namespace loom::transport {

inline constexpr std::size_t kMaxParts = 8;        // paths one message is striped across
inline constexpr std::size_t kStripeAlign = 4096;  // part offsets are multiples of this

/// Length of every part but the last (which takes the rest, so it is shorter unless the length
/// divides evenly): len / parts rounded up to a multiple of kStripeAlign.
inline std::size_t stripe_part_len(std::size_t len, std::size_t parts) {
  if (parts <= 1) return len;
  std::size_t each = (len + parts - 1) / parts;
  return (each + kStripeAlign - 1) / kStripeAlign * kStripeAlign;
}
/// How many parts a message of `len` bytes is split into, over a connection of `nsockets`
/// sockets that stripes messages of at least 2 x `stripe_min` bytes: at most one part per socket,
/// at most kMaxParts, about `stripe_min` bytes or more each, none empty. Both sides compute it
/// from the posted length, so they agree on the split without telling each other.
inline std::size_t stripe_parts(std::size_t len, std::size_t nsockets, std::size_t stripe_min) {
  if (nsockets <= 1 || stripe_min == 0 || len < 2 * stripe_min) return 1;
  std::size_t parts = std::min({nsockets, kMaxParts, len / stripe_min});
  while (parts > 1 && (parts - 1) * stripe_part_len(len, parts) >= len) --parts;  // no empty part
  return parts;
}

}  // namespace loom::transport
