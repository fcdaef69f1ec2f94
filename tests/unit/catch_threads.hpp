// INFO that rank threads may use at the same time. Catch2 v2 keeps one list of scoped messages
// for the whole run and builds them from a shared pool of streams, neither locked: two threads
// in INFO at once corrupt both (a crash, now and then, in a test that passes). This INFO builds
// its text with a plain stream and pushes and pops it under one lock. (Failing assertions from
// several threads at once still race inside Catch; passing ones do not touch shared state.)
#pragma once

#include <catch2/catch.hpp>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

namespace loom::test {

inline std::mutex& catch_message_mutex() {
  static std::mutex mu;
  return mu;
}

class LockedMessage {
 public:
  template <typename Write>
  LockedMessage(const Catch::SourceLineInfo& where, Write&& write) {
    std::ostringstream os;
    std::forward<Write>(write)(os);
    std::lock_guard lk(catch_message_mutex());
    info_.emplace(Catch::StringRef("INFO"), where, Catch::ResultWas::Info);
    info_->message = os.str();
    Catch::getResultCapture().pushScopedMessage(*info_);
  }
  LockedMessage(const LockedMessage&) = delete;
  LockedMessage& operator=(const LockedMessage&) = delete;
  ~LockedMessage() {
    // As Catch's own: a message stays while an exception unwinds, to be reported with it.
    if (std::uncaught_exceptions() > 0) return;
    std::lock_guard lk(catch_message_mutex());
    Catch::getResultCapture().popScopedMessage(*info_);
  }

 private:
  std::optional<Catch::MessageInfo> info_;
};

}  // namespace loom::test

#undef INFO
#define INFO(msg)                                                         \
  ::loom::test::LockedMessage INTERNAL_CATCH_UNIQUE_NAME(loomLockedInfo)( \
      CATCH_INTERNAL_LINEINFO, [&](std::ostream& loom_info_os) { loom_info_os << msg; })
