// One call of the peer-read route as an engine task (peer_read.hpp says what it does): posts
// this rank's card, reads the peers', then enqueues the call on the communicator's stream (or
// runs the cuda_ipc FIFO task instead, when a rank could not share its buffers).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device/peer_read.hpp"

namespace loom::device {

class PeerReadTask final : public exec::Task {
 public:
  PeerReadTask(PeerReadRoute& route, coll::OpDesc op, PeerCard card, Event ready, Deadline deadline,
               PeerReadRoute::Fallback fallback, std::function<void()> on_done)
      : route_(route),
        op_(std::move(op)),
        card_(card),
        ready_(ready),
        deadline_(deadline),
        fallback_(std::move(fallback)),
        on_done_(std::move(on_done)),
        cards_(static_cast<std::size_t>(route.nranks_)),
        got_(static_cast<std::size_t>(route.nranks_), false) {}
  ~PeerReadTask() override;
  PeerReadTask(const PeerReadTask&) = delete;
  PeerReadTask& operator=(const PeerReadTask&) = delete;

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

  [[nodiscard]] std::uint64_t ticket() const { return card_.ticket; }
  [[nodiscard]] const coll::OpDesc& op() const { return op_; }
  [[nodiscard]] const std::vector<PeerCard>& cards() const { return cards_; }
  [[nodiscard]] Event ready() const { return ready_; }
  /// The route keeps the event from here (the call is on the device).
  Event take_ready() { return std::exchange(ready_, nullptr); }

 private:
  enum class Stage { Post, Collect, Enqueue, Fallback, Done };
  /// Reads the peers' cards not read yet; false while one is missing.
  Result<bool> collect();
  Status check_match(int peer, const PeerCard& theirs) const;
  Result<exec::Progress> run_fallback();
  void done();  // the call is on the device: the task is complete

  PeerReadRoute& route_;
  coll::OpDesc op_;
  PeerCard card_;
  Event ready_;  // recorded on the caller's stream; the route's until the task hands it back
  Deadline deadline_;
  PeerReadRoute::Fallback fallback_;
  std::function<void()> on_done_;
  std::vector<PeerCard> cards_;  // by rank
  std::vector<bool> got_;
  int missing_ = -1;  // the peer whose card was missing at the last look
  Stage stage_ = Stage::Post;
  bool enqueued_ = false;              // the call is on the stream (or was run by the fallback)
  std::unique_ptr<exec::Task> inner_;  // the fallback
  bool inner_started_ = false;
};

}  // namespace loom::device
