// libFuzzer target: the shared-memory card a peer publishes in the store (transports/shm/
// shm_card.hpp), from which a rank learns the peer's pid, its doorbell, its descriptor mailbox and
// the nonce that names its channel (which also ends up in a /dev/shm name). Whatever the text: a
// card is accepted only with every field in range, and it formats back to an equal card.
#include <string>

#include "transports/shm/doorbell.hpp"
#include "transports/shm/shm_card.hpp"

namespace shm = loom::transport::shm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto card = shm::parse_card(text, 0, 1);
  if (!card.is_ok()) return 0;
  const shm::Card& c = card.value();
  if (c.pid <= 0 || c.nonce.size() != 32 || c.nonce.find('/') != std::string::npos ||
      !shm::DoorbellAddress::from_name(c.doorbell).is_ok() ||
      (!c.mailbox.empty() && !shm::DoorbellAddress::from_name(c.mailbox).is_ok()))
    __builtin_trap();
  auto again = shm::parse_card(shm::format_card(c), 0, 1);
  if (!again.is_ok() || again->pid != c.pid || again->pid_ns != c.pid_ns ||
      again->doorbell != c.doorbell || again->mailbox != c.mailbox || again->nonce != c.nonce)
    __builtin_trap();
  return 0;
}
