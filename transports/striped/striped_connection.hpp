// A Connection to one peer over several rails: one Connection per rail (each its own endpoint
// pair, e.g. an ofi endpoint per NIC), used side by side. A message of at least twice the
// striping threshold is split into up to one part per rail (transports/striping.hpp); the parts
// go to consecutive rails round-robin, continuing where the previous message left off, and so do
// whole smaller messages. Both sides count the same way in posting order (sends and receives
// separately) and split by the posted length, so parts meet without a word: part i of a message
// travels as an ordinary message (same tag) on its rail, where that rail's own matching and
// mismatch checks apply. A request completes when all its parts have; once one part fails, the
// connection stays failed (as each rail's does), whatever rail the next message would take.
//
// Any-source receives need peek_unread(), which a striped connection does not offer (a part's
// length is not the message's); it passes on the rails' other capabilities.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/connection.hpp"
#include "transports/request_table.hpp"
#include "transports/striping.hpp"

namespace loom::transport {

class StripedConnection final : public Connection {
 public:
  /// `rails`: the peer's connections, one per rail, in rail order (the peer's side lists the
  /// same rails in the same order); not owned, they must outlive this. `stripe_min`: messages of
  /// at least twice this many bytes are split (0: never).
  StripedConnection(std::vector<Connection*> rails, std::size_t stripe_min);

  [[nodiscard]] Caps caps() const override;
  [[nodiscard]] int peer() const override { return rails_.front()->peer(); }
  [[nodiscard]] std::string name() const override { return rails_.front()->name(); }
  [[nodiscard]] std::size_t rails() const { return rails_.size(); }
  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> isend_buffered(const MemRegion& region, std::size_t off, std::size_t len,
                                 const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  bool prepare_wait(std::vector<pollfd>& fds) override;

 private:
  struct Part {
    Connection* rail = nullptr;
    Request request;
    bool done = false;
  };
  struct Op {
    std::uint64_t id = 0;
    std::size_t nparts = 0;
    std::array<Part, kMaxParts> parts{};
  };
  enum class Kind { Send, BufferedSend, Recv };
  Result<Request> post(Kind kind, const MemRegion& region, std::size_t off, std::size_t len,
                       const Tag& tag);

  std::vector<Connection*> rails_;
  std::size_t stripe_min_;
  std::size_t next_send_ = 0;  // the rail of the next send part
  std::size_t next_recv_ = 0;  // the rail of the next receive part
  Status failed_;  // a part failed (mismatch, dead peer): every later post fails with it
  RequestTable<Op> ops_;
};

}  // namespace loom::transport
