// A rank's doorbell: a non-blocking abstract-namespace AF_UNIX datagram socket. Peers ring it
// (send one byte) after publishing data or freeing space that a sleeping rank waits for; the
// rank's executor polls it while blocked. One doorbell serves all shared-memory connections of a
// transport, which are driven by one thread at a time.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/socket.hpp"
#include "common/status.hpp"

namespace loom::transport::shm {

/// Where a doorbell is: the abstract socket name (without the leading NUL byte).
class DoorbellAddress {
 public:
  /// Validates `name` ("loom-...", printable, short enough for sun_path).
  static Result<DoorbellAddress> from_name(const std::string& name);
  [[nodiscard]] const sockaddr* raw() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  [[nodiscard]] socklen_t len() const { return len_; }

 private:
  sockaddr_un addr_{};
  socklen_t len_ = 0;
};

class Doorbell {
 public:
  /// Binds a new doorbell named "loom-<comm_id hex>-<rank>-<random hex>".
  static Result<std::shared_ptr<Doorbell>> create(std::uint64_t comm_id, int rank);
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] int fd() const { return fd_.get(); }

  /// Rings the doorbell at `to`. A full queue (EAGAIN) already means "wake up", and a doorbell
  /// that is gone belongs to a peer that is gone: neither is an error here.
  void ring(const DoorbellAddress& to) const;
  /// Rings `to` and reports whether it exists (used once at connection setup: a doorbell in
  /// another network namespace is unreachable, and then we could never wake that peer).
  [[nodiscard]] Status probe(const DoorbellAddress& to, int peer) const;

  /// Called by each connection before it arms its sleeping flags. The first call of a wait cycle
  /// drains the queued rings (every flag is armed and its condition re-checked after the drain,
  /// so no wake-up that matters is lost); later calls in the same cycle do nothing.
  void begin_wait() {
    if (!waiting_) drain();
    waiting_ = true;
  }
  /// Called whenever a connection is used again: the next begin_wait() starts a new cycle.
  void end_wait() { waiting_ = false; }

 private:
  Doorbell(net::Fd fd, std::string name) : fd_(std::move(fd)), name_(std::move(name)) {}
  void drain() const;

  net::Fd fd_;
  std::string name_;
  bool waiting_ = false;
};

}  // namespace loom::transport::shm
