// A large allreduce through the communicator's arena (transports/arena.hpp), piece by piece, two
// arena steps per piece (LOOM_SHM_TWOSHOT_PIECE):
//
//   reduce step: every rank writes its input's piece to its slot; each folds its block of the
//                piece from every rank's slot, in rank order, into its output;
//   gather step: every rank writes its reduced block to its slot; each copies the others'.
//
// Each step is one arena call, with the arena's lockstep (a rank writes a slot only once every
// rank has published the step before): the slots are reused without acknowledgements, and a
// slot holding another step or call is a Mismatch naming both ranks and both calls. Every byte of
// the message crosses memory about 5 + 1/n times on each rank, against 9 (n - 1) / n for a ring
// through the shared-memory channels; the fold order is LOOM_DETERMINISTIC's, so every rank
// computes the same bits, and the same as the one-step arena and deterministic mode's messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "core/task_host.hpp"
#include "executor/task.hpp"
#include "transports/arena.hpp"

namespace loom::detail {

class TwoShotTask final : public exec::Task {
 public:
  /// The algorithm name the call ledger, logs and errors give these calls.
  static constexpr const char* kAlgorithm = "twoshot";

  /// `piece_bytes`: input bytes per rank and piece (at most the arena's capacity); `yield`: the
  /// engine's yield phase for this call.
  TwoShotTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op, std::size_t piece_bytes,
              Deadline deadline, std::chrono::microseconds yield);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }
  [[nodiscard]] std::optional<std::chrono::microseconds> yield() const override { return yield_; }

  /// The steps of an allreduce of `count` elements in pieces of `piece_elems`: two per piece.
  static std::uint64_t steps(std::size_t count, std::size_t piece_elems);
  /// Block `rank` of a piece of `elems` elements split over `nranks` ranks: [first, first + n).
  struct Block {
    std::size_t first = 0;
    std::size_t elems = 0;
  };
  static Block block_of(std::size_t elems, int rank, int nranks);

 private:
  /// The current step's piece: [first, first + elems) of the call's elements.
  [[nodiscard]] Block piece() const;
  [[nodiscard]] bool reducing() const { return step_ % 2 == 0; }
  /// The bytes `rank` writes to its slot in the current step.
  [[nodiscard]] std::size_t slot_bytes(int rank) const;
  /// Waits until every rank has published the step before (checking it), then publishes this
  /// rank's part of the current step. False: a rank has not published it yet.
  Result<bool> publish_when_free();
  /// Waits for every rank's slot of the current step (checking it). False: one is missing.
  Result<bool> gather_slots();
  /// Every slot is there: this rank's part of the result.
  void compute();

  TaskHost& comm_;
  transport::Arena& arena_;
  coll::OpDesc op_;
  std::size_t esize_;
  std::size_t piece_elems_;
  std::uint64_t steps_;
  Deadline deadline_;
  std::chrono::microseconds yield_;
  std::uint64_t step_ = 0;  // the current step: piece step_ / 2, reducing when even
  bool published_ = false;  // this rank's part of the step is in its slot
  int next_ = 0;            // ranks below have published the step awaited (previous, then this)
  std::vector<const void*> slots_;  // by rank: the current step's slots (its own too)
};

}  // namespace loom::detail
