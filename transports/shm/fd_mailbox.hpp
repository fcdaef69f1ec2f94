// How a rank hands an anonymous shared-memory segment (memfd) to a peer on its host: each rank
// listens on an abstract-namespace AF_UNIX SOCK_SEQPACKET socket, its mailbox (no file anywhere;
// gone with the process, like the doorbell). A sender connects, sends one Letter with the
// segment's descriptor attached (SCM_RIGHTS) and closes; the receiver takes the connection
// whenever it next waits for a descriptor. Nothing ever exists in /dev/shm, and the kernel frees
// the memory with its last descriptor or mapping, whoever is killed when: a descriptor in flight
// belongs to the receiver's socket and goes with it.
//
// Anyone on the host may connect to an abstract socket: a letter counts only when the kernel
// says (SO_PEERCRED) it comes from our user and from the process the peer published in the
// authenticated store, and it carries the random nonce published there for that channel.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "common/status.hpp"
#include "transports/shm/doorbell.hpp"

namespace loom::transport::shm {

/// What travels with a descriptor.
struct Letter {
  static constexpr std::uint64_t kMagic = 0x314446484d4f4f4cULL;  // "LOOMHFD1"
  std::uint64_t magic = kMagic;
  std::uint64_t comm_id = 0;
  std::int32_t from_rank = -1;
  std::int32_t to_rank = -1;
  std::array<char, 32> nonce{};  // the channel's nonce (hex), as published in the store
};
static_assert(sizeof(Letter) == 56);

class FdMailbox {
 public:
  /// Listens on "loom-<comm_id hex>-<rank>-<random hex>-fd" in the abstract namespace.
  static Result<std::unique_ptr<FdMailbox>> open(std::uint64_t comm_id, int rank);
  FdMailbox(const FdMailbox&) = delete;
  FdMailbox& operator=(const FdMailbox&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }

  /// Hands `fd` to the mailbox at `to` with `letter`. A full queue is retried until `deadline`;
  /// a mailbox that is gone means its rank is gone (PeerFailed naming `letter.to_rank`).
  static Status send(const DoorbellAddress& to, const Letter& letter, int fd, Deadline deadline);

  /// Waits until `from` (process `pid`) has sent the descriptor of the channel published with
  /// `nonce`, collecting the letters of other peers on the way. `check` is asked every 100 ms
  /// (a non-ok status ends the wait with it).
  Result<net::Fd> receive(int from, pid_t pid, const std::array<char, 32>& nonce, Deadline deadline,
                          const std::function<Status()>& check);

 private:
  FdMailbox(net::Fd fd, std::string name, std::uint64_t comm_id, int rank)
      : fd_(std::move(fd)), name_(std::move(name)), comm_id_(comm_id), rank_(rank) {}
  void collect();
  bool read_letter(int conn);
  void wait(Deadline until);

  struct Unread {  // a connection whose letter has not arrived yet
    net::Fd fd;
    Clock::time_point expires;
  };
  struct Stashed {  // a descriptor that arrived before its receive()
    pid_t pid = 0;
    Letter letter;
    net::Fd fd;
  };

  net::Fd fd_;
  std::string name_;
  std::uint64_t comm_id_;
  int rank_;
  std::deque<Unread> unread_;
  std::deque<Stashed> stash_;
};

}  // namespace loom::transport::shm
