// A large allreduce, allgather or reduce_scatter through the communicator's arena
// (transports/arena.hpp), piece by piece (LOOM_SHM_ARENA_PIECE). Each step is one arena call:
//
//   allreduce ("twoshot"), two steps per piece:
//     reduce step: every rank writes its input's piece to its slot; each folds its block of the
//                  piece from every rank's slot, in rank order, into its output;
//     gather step: every rank writes its reduced block to its slot; each copies the others'.
//   allgather ("pieces"): every rank writes its input's piece; each copies every rank's piece.
//   reduce_scatter ("pieces"): every rank writes the piece of each rank's block of its input;
//                  each folds the piece of its own block from every rank's slot, in rank order.
//
// The arena's lockstep holds for steps as for calls (a rank writes a slot only once every rank
// has published the step before): slots are reused without acknowledgements, and a slot holding
// another step or call is a Mismatch naming both ranks and both calls. Where a ring through the
// shared-memory channels copies every byte into a slot and out again at each of its steps,
// these copy each rank's input in once (less its own block, folded from its input) and every
// result out once (docs/algorithms.md). The fold order is LOOM_DETERMINISTIC's: every rank
// computes the same bits, those of the one-step arena and of deterministic mode's messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "core/group_tasks.hpp"
#include "core/task_host.hpp"
#include "executor/task.hpp"
#include "transports/arena.hpp"

namespace loom::detail {

class ArenaPiecesTask final : public exec::Task {
 public:
  /// The algorithm names the call ledger, logs and errors give these calls.
  static constexpr const char* kTwoShot = "twoshot";  // allreduce
  static constexpr const char* kPieces = "pieces";    // allgather, reduce_scatter
  [[nodiscard]] static const char* algorithm(coll::CollKind kind);

  /// The fewest ranks at which `kind` moves fewer bytes through memory in pieces than a ring
  /// through the shared-memory channels does (allreduce and allgather 3, reduce_scatter 4).
  [[nodiscard]] static int min_ranks(coll::CollKind kind);
  /// The elements of each piece for `op` on `nranks` ranks with `piece_bytes` per rank and
  /// step (for reduce_scatter, of each of the nranks blocks); 0 when `op` is not served (another
  /// collective, fewer than min_ranks) or a piece cannot hold one element (reduce_scatter on
  /// very many ranks).
  [[nodiscard]] static std::size_t piece_elems(const coll::OpDesc& op, int nranks,
                                               std::size_t piece_bytes);
  /// The steps of `op` (count > 0) in pieces of `piece_elems`: two per piece for allreduce.
  [[nodiscard]] static std::uint64_t steps(const coll::OpDesc& op, std::size_t piece_elems);
  /// Block `rank` of a piece of `elems` elements split over `nranks` ranks: [first, first + n).
  struct Block {
    std::size_t first = 0;
    std::size_t elems = 0;
  };
  [[nodiscard]] static Block block_of(std::size_t elems, int rank, int nranks);

  /// `op` is served (piece_elems > 0, count > 0); `yield`: the engine's yield phase. `fused`:
  /// an allreduce that carries a group's calls, read from and written to their own buffers
  /// (op's buffers are then unused): no packing.
  ArenaPiecesTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op, std::size_t piece_elems,
                  Deadline deadline, std::chrono::microseconds yield,
                  const std::vector<FusedPiece>* fused = nullptr);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }
  [[nodiscard]] std::optional<std::chrono::microseconds> yield() const override { return yield_; }

 private:
  enum class Step { Reduce, Gather, Copy, Fold };  // allreduce's two, allgather's, reduce_scatter's
  [[nodiscard]] Step step() const;
  /// The current step's piece: [first, first + elems) of the call's count.
  [[nodiscard]] Block piece() const;
  /// The bytes `rank` writes to its slot in the current step.
  [[nodiscard]] std::size_t slot_bytes(int rank) const;
  [[nodiscard]] const std::uint8_t* send_at(std::size_t element) const;
  [[nodiscard]] std::uint8_t* recv_at(std::size_t element) const;
  /// Waits until every rank has published the step before (checking it), then publishes this
  /// rank's part of the current step. False: a rank has not published it yet.
  Result<bool> publish_when_free();
  /// Writes this rank's part of the current step to `slot`.
  void fill(std::uint8_t* slot) const;
  /// Waits for every rank's slot of the current step (checking it). False: one is missing.
  Result<bool> gather_slots();
  /// Every slot is there: this rank's part of the result.
  void compute();
  /// Folds the `elems` elements at `offset` bytes into every rank's slot, in rank order, this
  /// rank's from `own` (its input) unless its input is scaled first (then from its slot).
  void fold(std::uint8_t* dst, std::size_t offset, const std::uint8_t* own, std::size_t elems);

  /// Where an allreduce's elements live: the call's buffers as one segment, or a fused group's
  /// calls, one each, in element order.
  struct Segment {
    std::size_t first = 0;  // element of the call
    std::size_t elems = 0;
    const std::uint8_t* send = nullptr;
    std::uint8_t* recv = nullptr;
  };
  /// Calls f(send, recv, at, n) for the parts of elements [first, first + elems) in each
  /// segment: `send`/`recv` point at the part's first element, `at` is its element offset from
  /// `first`, `n` its length.
  template <typename F>
  void each_part(std::size_t first, std::size_t elems, F&& f) const;

  TaskHost& comm_;
  transport::Arena& arena_;
  coll::OpDesc op_;
  std::size_t esize_;
  std::size_t piece_elems_;
  std::uint64_t steps_;
  Deadline deadline_;
  std::chrono::microseconds yield_;
  std::uint64_t step_ = 0;  // the current step
  bool published_ = false;  // this rank's part of the step is in its slot
  int next_ = 0;            // ranks below have published the step awaited (previous, then this)
  std::vector<const void*> slots_;  // by rank: the current step's slots (its own too)
  std::vector<const void*> parts_;  // by rank: what a fold reads
  std::vector<Segment> segments_;   // allreduce: by first element
};

}  // namespace loom::detail
