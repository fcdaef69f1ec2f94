// A transport that carries device buffers (cuda_ipc): what the direct path (src/device/
// direct_path.hpp) asks of it beyond a Transport, without naming it: the device runtime, the one
// stream every device operation of the communicator is ordered on, and, where every rank agreed
// on it, the board of the peer-read route (src/device/peer_read.hpp).
#pragma once

#include <cstdint>

#include "device_api/device.hpp"
#include "device_api/peer_card.hpp"
#include "transports/transport.hpp"

namespace loom::transport {

/// The host shared memory through which the ranks of a host run the peer-read route: each
/// rank's cards (its calls, with IPC references to its buffers), and the 32-bit flag words its
/// stream waits on (cuStreamWaitValue32), which the peers' streams write (cuStreamWriteValue32).
/// Every word is in memory registered with the device, so a stream may write or wait on it; the
/// host may write them too.
class PeerBoard {
 public:
  virtual ~PeerBoard() = default;
  /// Publishes this rank's card (tickets 1, 2, ... in order). False, doing nothing, while a
  /// peer has not yet read the card the ring slot holds: try again later.
  virtual bool post(const device::PeerCard& card) = 0;
  /// Copies `peer`'s card of `ticket` into `out`; false while the peer has not posted it.
  virtual bool read(int peer, std::uint64_t ticket, device::PeerCard& out) = 0;
  /// This rank's flag word that `from`'s stream writes.
  [[nodiscard]] virtual std::uint32_t* inbox(int from) const = 0;
  /// The flag word of rank `to` that this rank's stream writes.
  [[nodiscard]] virtual std::uint32_t* outbox(int to) const = 0;
  /// This rank's abandon word (device::MultiReduce::skip_word), written by its host.
  [[nodiscard]] virtual std::uint32_t* abandon_word() const = 0;
  /// The last of this rank's cards that `peer` has read (for reports).
  [[nodiscard]] virtual std::uint64_t read_by(int peer) const = 0;
  /// This rank leaves the board (its route is going away): its peers stop waiting for it.
  /// `cause`: the rank whose failure made it leave (-1: none), whom the peers' errors then name.
  virtual void close(int cause) = 0;
  /// Whether `peer` has left the board; `cause` gets the rank it named (-1: none).
  [[nodiscard]] virtual bool closed(int peer, int& cause) const = 0;
};

class DeviceTransport : public Transport {
 public:
  [[nodiscard]] virtual device::Device& device() const = 0;
  /// The one stream every device operation of this communicator is ordered on.
  [[nodiscard]] virtual device::Stream stream() const = 0;
  [[nodiscard]] virtual int device_ordinal() const = 0;
  [[nodiscard]] virtual int rank() const = 0;
  /// The peer-read route's board; null where the ranks did not agree on the route.
  [[nodiscard]] virtual PeerBoard* peer_board() const { return nullptr; }
  /// The first rank this rank saw fail (note_failure), or -1.
  [[nodiscard]] virtual int failed_rank() const { return -1; }
};

}  // namespace loom::transport
