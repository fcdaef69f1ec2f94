// The transport registry, in the spirit of NCCL's table of transports: each transport (shm, tcp,
// ofi for host buffers, cuda_ipc for device buffers) registers one Entry under its
// TransportKind: its factory and the few narrow hooks the communicator calls around it (check
// the settings, open before the layout is known, complete once it is, clean up after a failed
// setup, probe whether it can run here, tell the cost model its own policy). The communicator
// creates the transports its peers use through it, from one neutral CreateContext, without
// naming a concrete transport. The built-in transports are registered explicitly by
// register_builtin_transports() (registry.cpp, one line per transport), so a static link keeps
// them: nothing depends on static initialisers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/crypto.hpp"
#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "common/status.hpp"
#include "config/config.hpp"
#include "transports/transport.hpp"

namespace loom::device {
class Device;
}

namespace loom::transport {

/// shm, tcp and ofi carry host buffers (each peer is routed to one of them); cuda_ipc carries
/// device buffers only, between ranks of one host (src/device/direct_path).
enum class TransportKind : std::uint8_t { Shm = 0, Tcp = 1, Ofi = 2, CudaIpc = 3 };
inline constexpr std::size_t kNumTransportKinds = 4;
/// Its name, as LOOM_TRANSPORTS and Transport::name() spell it.
std::string_view to_string(TransportKind k);
/// The kind named `name` ("shm", "tcp", "ofi", "cuda_ipc"), if any.
std::optional<TransportKind> kind_named(std::string_view name);

/// A subset of NICs picked for this rank, and why (for the logs).
struct NicSubset {
  std::vector<std::string> names;
  std::string why;
};

/// What a transport may use when it is created: the same for every transport (each reads what
/// it needs; fields a caller does not know stay empty).
struct CreateContext {
  int rank = 0;
  int nranks = 1;
  std::uint64_t comm_id = 0;
  std::shared_ptr<bootstrap::Store> store;
  std::string store_prefix;                // the communicator's keys in the store ("loom/<id>/")
  const config::Config* config = nullptr;  // the communicator's settings (each reads its own)
  net::SocketAddress data_address;         // this rank's data address (tcp binds here)
  crypto::Secret secret{};                 // the job secret: data connections prove knowing it
  int ranks_on_host = 1;                   // ranks on this rank's host
  double cpu_load = 1;                     // ranks on this rank's busiest CPU
  double host_cpu_load = 1;                // ranks on the busiest CPU of this rank's host
  std::vector<net::SocketAddress> peer_addresses;  // every rank's data address (empty: unknown)
  /// Every rank's further data addresses, one per extra rail (Transport::card_rails; empty:
  /// unknown, or no rank has more than one).
  std::vector<std::vector<net::SocketAddress>> peer_rails;
  std::vector<std::string> host_ids;  // every rank's host (empty: unknown)
  /// PeerFailed naming the peer when it is known to have failed (asked while connecting; peer -1:
  /// any peer, for collective waits such as the arena's allgather).
  std::function<Status(int peer)> peer_check;
  /// The NICs (libfabric domains, interfaces) of `candidates` nearest to this rank: those under
  /// its GPU's PCIe switch, else on its NUMA node; all when none is nearer (or unset).
  std::function<NicSubset(const std::vector<std::string>& candidates)> nearest_nics;
  // Device-buffer transports (cuda_ipc), whose creation is collective:
  device::Device* device = nullptr;  // the device runtime
  bool allowed = true;               // this rank's LOOM_TRANSPORTS lets this kind run
  Deadline deadline = Deadline::never();
};

/// Whether a transport can run here (Entry::probe).
struct Availability {
  bool available = false;
  bool preferred = false;   // run it even where nobody asked for it (ofi: the provider is EFA)
  std::string provider;     // what was found
  std::string why_missing;  // when not available (or not preferred): what was asked, what exists
};

/// What a transport's own policy tells the cost model, as plain values (src/selector keeps them
/// in select::Tuning). Only shm states any: its single-copy threshold and slot order.
struct CostFacts {
  double single_copy_min = 0;                  // the threshold set (0: automatic; 1e30: off)
  double auto_single_copy_min = 0;             // the automatic one where each rank has a CPU
  double auto_shared_cpu_single_copy_min = 0;  // the automatic one where ranks share a CPU
  double reuse_slots_above = 0;  // automatic slot reuse above this many ranks on a CPU
};

using Factory = Result<std::unique_ptr<Transport>> (*)(const CreateContext&);

/// One transport's row in the registry. Only `create` is required.
struct Entry {
  /// A new transport for ctx.rank. cuda_ipc's is collective and null when some rank excludes it.
  Factory create = nullptr;
  /// Opens the transport before the job's layout is known, so that its address() can go into
  /// this rank's card (tcp: its listener); `complete` finishes it once the layout is known. The
  /// context's layout fields (peer_addresses, host_ids, loads) are empty then.
  Factory prepare = nullptr;
  Status (*complete)(Transport& prepared, const CreateContext& ctx) = nullptr;
  /// InvalidUsage naming the setting when one of this transport's settings is bad, asked when a
  /// communicator is created so that creation fails early even where no peer uses it.
  Status (*check_settings)(const config::Config& cfg) = nullptr;
  /// After this rank's setup failed because a peer died: removes what dead ranks left behind
  /// (shm: their /dev/shm names).
  void (*cleanup_after_failed_setup)(int rank, std::uint64_t comm_id) = nullptr;
  /// Whether it can run here (`requested`: the user asked for it); null: always.
  Availability (*probe)(const config::Config& cfg, const net::SocketAddress& data_address,
                        bool requested) = nullptr;
  /// Its own policy for the cost model; null: nothing to say.
  Result<CostFacts> (*cost_facts)(const config::Config& cfg) = nullptr;
};

class Registry {
 public:
  /// Registers `entry` (or a create-only entry) for `kind`; a kind registers once.
  Status add(TransportKind kind, Entry entry);
  Status add(TransportKind kind, Factory make) { return add(kind, Entry{make}); }
  [[nodiscard]] bool has(TransportKind kind) const;
  /// A new transport of `kind`; an error naming the kind when none is registered.
  Result<std::unique_ptr<Transport>> create(TransportKind kind, const CreateContext& ctx) const;

  /// Every kind's prepared transport (kinds with a `prepare` hook, in kind order).
  Result<std::vector<std::unique_ptr<Transport>>> prepare(const CreateContext& ctx) const;
  /// Completes a transport that `prepare` returned (its kind's `complete`, if any).
  Status complete(Transport& prepared, const CreateContext& ctx) const;
  /// Every registered kind's settings (the first bad one's error).
  Status check_settings(const config::Config& cfg) const;
  /// Every registered kind's cleanup after a setup that failed because a peer died.
  void cleanup_after_failed_setup(int rank, std::uint64_t comm_id) const;
  /// Whether `kind` can run here (available when it has no probe).
  Availability probe(TransportKind kind, const config::Config& cfg,
                     const net::SocketAddress& data_address, bool requested) const;
  /// `kind`'s facts for the cost model (empty facts when it states none).
  Result<CostFacts> cost_facts(TransportKind kind, const config::Config& cfg) const;

 private:
  [[nodiscard]] const Entry* entry(TransportKind kind) const;
  std::array<Entry, kNumTransportKinds> entries_{};
};

/// Registers shm, tcp, ofi and cuda_ipc in `r`.
Status register_builtin_transports(Registry& r);
/// The registry of the built-in transports (registered on first use, once).
const Registry& builtin_transports();

}  // namespace loom::transport
