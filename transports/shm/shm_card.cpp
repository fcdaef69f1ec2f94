#include "transports/shm/shm_card.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

#include "transports/shm/doorbell.hpp"

namespace loom::transport::shm {
namespace {

bool is_hex(const std::string& s, std::size_t len) {
  return s.size() == len && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string format_card(const Card& card) {
  return fmt::format("{} {} {} {} {}", card.pid, card.pid_ns, card.doorbell,
                     card.mailbox.empty() ? "-" : card.mailbox, card.nonce);
}

Result<Card> parse_card(const std::string& text, int reader, int rank) {
  std::istringstream in(text);
  Card c;
  long long pid = 0;
  std::string rest;
  if (!(in >> pid >> c.pid_ns >> c.doorbell >> c.mailbox >> c.nonce) || (in >> rest) || pid <= 0 ||
      pid > INT_MAX || !is_hex(c.nonce, 32) || !DoorbellAddress::from_name(c.doorbell).is_ok() ||
      (c.mailbox != "-" && !DoorbellAddress::from_name(c.mailbox).is_ok()))
    return make_error(ErrorCode::Mismatch,
                      "rank {}: rank {} published a malformed shared-memory card (different loom "
                      "versions?)",
                      reader, rank);
  c.pid = static_cast<pid_t>(pid);
  if (c.mailbox == "-") c.mailbox.clear();
  return c;
}

}  // namespace loom::transport::shm
