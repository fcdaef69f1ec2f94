// The rendezvous identity of a job: where rank 0's rendezvous server listens, plus secrets.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

/// Identifies one communicator's rendezvous. Create it once (on one rank, or in a launcher),
/// share it with every rank out of band (it is 128 plain bytes, like NCCL's id), and pass it to
/// the Communicator constructor on each rank.
class UniqueId {
 public:
  static constexpr std::size_t kBytes = 128;

  UniqueId() = default;

  /// Starts a rendezvous server in this process, listening on `bind_address` ("host:port",
  /// "host", or "" for this host's first non-loopback IPv4 address with an ephemeral port), and
  /// returns the id naming it, with a fresh random secret and communicator id. When a
  /// communicator of this process joins the id, the server lives as long as that communicator
  /// (and those derived from it) and the peers that still need it; otherwise until this process
  /// exits.
  static UniqueId create(std::string_view bind_address = "");

  /// An id naming a rendezvous server that the rank 0 Communicator will start itself at
  /// `root_address` ("host:port"). Used by environment initialisation (LOOM_ROOT, MASTER_ADDR).
  static UniqueId for_root(std::string_view root_address, std::string_view secret = "");

  [[nodiscard]] std::array<std::uint8_t, kBytes> to_bytes() const;
  static UniqueId from_bytes(const std::array<std::uint8_t, kBytes>& bytes);
  /// Hex form of to_bytes(), for environment variables and command lines.
  [[nodiscard]] std::string to_string() const;
  static UniqueId from_string(std::string_view hex);

  [[nodiscard]] const std::string& root_address() const noexcept { return root_; }
  [[nodiscard]] std::uint64_t comm_id() const noexcept { return comm_id_; }
  [[nodiscard]] const std::array<std::uint8_t, 16>& secret() const noexcept { return secret_; }
  /// True when the rank-0 Communicator must start the rendezvous server itself.
  [[nodiscard]] bool root_served_by_rank0() const noexcept { return rank0_serves_; }

  friend bool operator==(const UniqueId&, const UniqueId&) = default;

 private:
  std::string root_;  // "host:port"
  std::uint64_t comm_id_ = 0;
  std::array<std::uint8_t, 16> secret_{};
  bool rank0_serves_ = false;
};

}  // namespace loom
