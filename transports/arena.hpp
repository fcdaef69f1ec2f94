// Shared memory that every rank of a communicator maps (all of its ranks on one host): each rank
// owns two call slots, used by its calls in turn, that it writes and every rank reads. A small
// collective then takes one step and no message: every rank writes its input into its slot, and
// each computes its own result from the slots it needs (core/arena_task.*). Made collectively by
// the transport that serves every peer (shm); other transports make none.
//
// Slot reuse needs no acknowledgement: a rank writes its slot for call m only once every rank
// has published its slot of call m - 1, which each rank does only after it has finished call
// m - 2, the last call to use the same slots. So no rank is ever more than one call ahead of
// another, and a rank whose call needs no other slot (a broadcast's root) completes at once.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/tag.hpp"

namespace loom::transport {

class Arena {
 public:
  virtual ~Arena() = default;
  /// Payload bytes per slot: the largest call the arena carries.
  [[nodiscard]] virtual std::size_t capacity() const = 0;
  /// This rank's slot for its current call (capacity() bytes).
  [[nodiscard]] virtual std::uint8_t* own_slot() = 0;
  /// The own slot holds call `tag`, `len` bytes: makes it visible to every rank and wakes the
  /// ranks that sleep waiting for it.
  virtual void publish(const coll::Tag& tag, std::size_t len) = 0;
  /// Rank `rank`'s slot of the current call once that rank has published it (its call in `tag`
  /// and `len`), else null. Never blocks.
  [[nodiscard]] virtual const std::uint8_t* peer_slot(int rank, coll::Tag& tag,
                                                      std::size_t& len) const = 0;
  /// Rank `rank`'s slot of the call before the current one (this rank's last finished call),
  /// once that rank has published it, else null (also before the first call). Before this rank
  /// publishes the current call, the slot still holds that call.
  [[nodiscard]] virtual const std::uint8_t* previous_slot(int rank, coll::Tag& tag,
                                                          std::size_t& len) const = 0;
  /// The current call has read every slot it needs: the next call uses the other slot.
  /// `read_every_slot`: it read every rank's slot, having compared each one's call with its own.
  virtual void finish(bool read_every_slot) = 0;
  /// Whether the call before the current one read every rank's slot (finish(true)): every rank
  /// had published it, with the same call, so the current call need neither wait for nor compare
  /// those slots again (false before the first call).
  [[nodiscard]] virtual bool previous_read_every_slot() const = 0;
  /// Before the driving thread blocks waiting for `rank`'s slot of the current call (or, with
  /// `previous`, of the one before): asks to be woken when a rank publishes (adds the descriptor
  /// to poll); false when `rank` has published it meanwhile.
  virtual bool prepare_wait(int rank, bool previous, std::vector<pollfd>& fds) = 0;
};

}  // namespace loom::transport
