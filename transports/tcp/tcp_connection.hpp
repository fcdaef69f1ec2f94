// A Connection to one peer over one or more TCP sockets. A message is one part, or, from twice
// the striping threshold up, several parts striped across consecutive sockets (see wire.hpp);
// parts are assigned to sockets round-robin in posting order (both sides count the same way, so
// they agree without a word), and each socket carries its parts in order. Sends: queued parts
// (header and payload) go out together in one sendmsg per socket. Receives: headers and small
// payloads are read through a per-socket staging buffer, so one recv usually brings a header with
// its payload (and what follows); large payloads are read straight into the caller's buffer.
// With a progress thread (see TcpProgress), a lock guards the queues: the thread moves bytes when
// sockets are ready, the executor's test() too (the thread stands back while the executor waits
// for the lock: ExecutorFirstMutex), and completions made by the thread are signalled on an
// eventfd that prepare_wait() hands to the executor.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "common/executor_first_mutex.hpp"
#include "common/socket.hpp"
#include "transports/connection.hpp"
#include "transports/request_table.hpp"
#include "transports/tcp/wire.hpp"

namespace loom::transport::tcp {

class TcpConnection final : public Connection {
 public:
  /// `stripe_min`: messages of at least twice this many bytes are striped (0: never).
  TcpConnection(int self_rank, int peer, std::uint64_t comm_id, std::vector<net::Fd> sockets,
                std::size_t stripe_min = 0);

  [[nodiscard]] Caps caps() const override {
    Caps c;
    c.peeks = true;
    return c;
  }
  [[nodiscard]] int peer() const override { return peer_; }
  [[nodiscard]] std::string name() const override { return "tcp"; }
  [[nodiscard]] std::size_t sockets() const { return sockets_.size(); }
  /// Socket `i`'s descriptor (for diagnostics and tests: which addresses it joins).
  [[nodiscard]] int socket_fd(std::size_t i) const { return sockets_.at(i).fd.get(); }
  [[nodiscard]] std::size_t stripe_min() const { return stripe_min_; }
  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  std::optional<Unread> peek_unread() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;

  /// Switches to progress-thread mode: new work is announced on `thread_wake_fd` (eventfd).
  Status enable_thread(int thread_wake_fd);
  /// For the progress thread: adds the sockets with queued work; true when progress is possible
  /// without waiting (staged bytes).
  bool thread_poll_fds(std::vector<pollfd>& fds);
  /// For the progress thread: progresses every socket with queued work, then tells the executor
  /// about completions and failures.
  void thread_progress();

  /// Bytes read ahead into the staging buffers per socket.
  static constexpr std::size_t kStageBytes = 64u << 10;

 private:
  struct Op;
  struct Part {
    Op* op = nullptr;
    std::uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t done = 0;  // payload bytes moved
    MessageHeader header;  // send: the header to write; recv: the header read
    std::size_t header_done = 0;
    std::uint16_t index = 0;
    std::uint16_t socket = 0;
  };
  struct Op {
    std::uint64_t id = 0;  // 0: free slot
    bool is_send = false;
    bool complete = false;
    std::size_t len = 0;
    Tag expected;  // recv: the tag the executor expects
    std::size_t nparts = 0;
    std::size_t parts_left = 0;
    std::array<Part, kMaxParts> parts{};
  };
  struct Socket {
    net::Fd fd;
    std::deque<Part*> sendq;
    std::deque<Part*> recvq;
    std::unique_ptr<std::uint8_t[]> stage;  // receive staging buffer (kStageBytes)
    std::size_t stage_begin = 0;
    std::size_t stage_end = 0;
  };

  Result<Op*> post(bool is_send, std::uint8_t* data, std::size_t len, const Tag& tag);
  std::unique_lock<std::mutex> lock();
  void wake_thread();
  void notify_executor();
  Status progress_send(Socket& s);
  Status progress_recv(Socket& s);
  Result<bool> fill_stage(Socket& s, const Part& p);
  Status take_staged(Socket& s, Part& p);
  Status header_done(Part& p);
  void part_done(Part& p);
  Status check_header(const Part& p) const;
  Status fail(Status why);
  [[nodiscard]] Status closed(const Part& p) const;
  [[nodiscard]] std::string who() const;

  int self_;
  int peer_;
  std::uint64_t comm_id_;
  std::size_t stripe_min_;
  std::vector<Socket> sockets_;
  RequestTable<Op> ops_;
  std::uint64_t next_send_socket_ = 0;
  std::uint64_t next_recv_socket_ = 0;
  Status broken_;
  // Progress-thread mode.
  ExecutorFirstMutex mu_;
  int thread_wake_fd_ = -1;  // the thread's eventfd (not owned); -1: no thread
  net::Fd notify_fd_;        // eventfd the executor sleeps on
  std::atomic<bool> notified_{false};
  std::uint64_t completions_ = 0;
};

}  // namespace loom::transport::tcp
