// A Plan is what one rank does for one collective: a list of Steps over byte ranges of its
// buffers, each step with the earlier steps it depends on. Algorithms build plans as pure
// functions (no I/O); the executor runs them.
//
// Ordering contract: for each (peer, direction), Send steps (resp. Recv steps) are matched with
// the peer's Recv (resp. Send) steps in plan order, so two ranks' plans must list the messages
// between them in the same order with the same sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::algo {

struct PlanIndex;

enum class BufId : std::uint8_t { Send = 0, Recv = 1, Scratch = 2 };

struct Span {
  BufId buf = BufId::Send;
  std::size_t offset = 0;  // bytes
  std::size_t bytes = 0;
};

enum class StepKind : std::uint8_t {
  Send,    // send `src` to `peer`
  Recv,    // receive from `peer` into `dst`
  Reduce,  // dst = src OP src2 (elementwise, the collective's dtype and op)
  Copy,    // dst = src
};

struct Step {
  StepKind kind = StepKind::Copy;
  int peer = -1;
  Span dst;
  Span src;
  Span src2;
  std::uint32_t dep_begin = 0;  // into Plan::deps
  std::uint32_t dep_count = 0;
};

struct Plan {
  std::string algorithm;  // "ring", "chain", "dissemination", ...
  std::vector<Step> steps;
  std::vector<std::uint32_t> deps;
  std::size_t scratch_bytes = 0;
  /// Sends use Connection::isend_buffered (the sender does not wait for its receiver to read).
  bool buffered_sends = false;
  /// The plan's structure as a run needs it (plan_index.hpp), when the plan is reused: set by
  /// the planner for the plans it caches; null: each run works it out.
  std::shared_ptr<const PlanIndex> index;

  /// Appends a step depending on `deps` (indices of earlier steps; kNoStep entries ignored) and
  /// returns its index.
  std::uint32_t add(Step step, std::initializer_list<std::uint32_t> step_deps = {});
  [[nodiscard]] std::vector<int> peers() const;
};

inline constexpr std::uint32_t kNoStep = 0xffffffffu;

inline Step send_to(int peer, Span src) {
  return {StepKind::Send, peer, {}, src, {}, 0, 0};
}
inline Step recv_from(int peer, Span dst) {
  return {StepKind::Recv, peer, dst, {}, {}, 0, 0};
}
inline Step reduce_into(Span dst, Span a, Span b) {
  return {StepKind::Reduce, -1, dst, a, b, 0, 0};
}
inline Step copy_into(Span dst, Span src) {
  return {StepKind::Copy, -1, dst, src, {}, 0, 0};
}

/// Splits `count` elements into `parts` nearly equal contiguous blocks; returns block `i` as
/// [first element, element count). The first (count % parts) blocks get one extra element.
struct Block {
  std::size_t first = 0;
  std::size_t count = 0;
};
Block split_block(std::size_t count, std::size_t parts, std::size_t i);

/// A fixed pool of scratch slots. Each slot remembers the step that last released it, so the
/// next user depends on that step. A slot must be released (in plan order) before it is taken
/// again: `acquire()` takes slots round-robin, `take(i)` a given one.
class SlotPool {
 public:
  SlotPool(std::size_t slot_bytes, std::size_t nslots, std::size_t base_offset = 0);
  struct Slot {
    std::size_t index = 0;
    Span span;                           // the whole slot
    std::uint32_t free_after = kNoStep;  // step to depend on before writing (kNoStep if none)
  };
  Slot acquire();
  Slot take(std::size_t index);
  void release(std::size_t index, std::uint32_t step);
  [[nodiscard]] std::size_t bytes() const { return slot_bytes_ * free_after_.size(); }

 private:
  std::size_t slot_bytes_;
  std::size_t base_;
  std::size_t next_ = 0;
  std::vector<std::uint32_t> free_after_;
};

}  // namespace loom::algo
