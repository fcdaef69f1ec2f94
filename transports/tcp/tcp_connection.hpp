// A Connection to one peer over one or more TCP sockets. Messages are assigned to sockets
// round-robin in posting order (both sides count the same way), each socket carries its
// messages in order, and small queued messages are written together with one sendmsg.
#pragma once

#include <array>
#include <deque>
#include <vector>

#include "common/socket.hpp"
#include "transports/connection.hpp"
#include "transports/request_table.hpp"
#include "transports/tcp/wire.hpp"

namespace loom::transport::tcp {

class TcpConnection final : public Connection {
 public:
  TcpConnection(int self_rank, int peer, std::uint64_t comm_id, std::vector<net::Fd> sockets);

  [[nodiscard]] Caps caps() const override { return {}; }
  [[nodiscard]] int peer() const override { return peer_; }
  [[nodiscard]] std::string name() const override { return "tcp"; }
  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  bool prepare_wait(std::vector<pollfd>& fds) override;

 private:
  struct Op {
    std::uint64_t id = 0;  // 0: free slot
    bool is_send = false;
    bool complete = false;
    std::uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t done = 0;  // payload bytes moved
    MessageHeader header;  // send: the header to write; recv: the header read
    std::size_t header_done = 0;
    Tag expected;  // recv: the tag the executor expects
    std::size_t socket = 0;
  };
  struct Socket {
    net::Fd fd;
    std::deque<Op*> sendq;
    std::deque<Op*> recvq;
  };

  Result<Op*> allocate(bool is_send);
  Status progress_send(Socket& s);
  Status progress_recv(Socket& s);
  Status check_header(const Op& op, const MessageHeader& got) const;
  Status fail(Status why);
  [[nodiscard]] std::string who() const;

  int self_;
  int peer_;
  std::uint64_t comm_id_;
  std::vector<Socket> sockets_;
  RequestTable<Op> ops_;
  std::uint64_t sends_posted_ = 0;
  std::uint64_t recvs_posted_ = 0;
  Status broken_;
};

}  // namespace loom::transport::tcp
