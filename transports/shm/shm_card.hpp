// What a rank publishes in the bootstrap store for each shared-memory peer before their channels
// are set up (see shm_transport.hpp): "<pid> <pid namespace> <doorbell> <mailbox or -> <nonce>".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace loom::transport::shm {

struct Card {
  pid_t pid = 0;             // the rank's process, watched while the connection is set up
  std::uint64_t pid_ns = 0;  // inode of its pid namespace (0: unknown)
  std::string doorbell;      // abstract socket name of its doorbell
  std::string mailbox;       // of its descriptor mailbox; empty: it hands over named segments
  std::string nonce;         // 32 lowercase hex digits naming the channel it sends on
};

std::string format_card(const Card& card);
/// Parses and checks every field of `rank`'s card as read by `reader` (Mismatch naming both when
/// malformed).
Result<Card> parse_card(const std::string& text, int reader, int rank);

}  // namespace loom::transport::shm
