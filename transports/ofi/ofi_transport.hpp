// Sets up OfiConnections: one libfabric endpoint per rank (see Fabric), whose address each rank
// publishes in the bootstrap store together with its provider and a TCP liveness address. A
// connection to a peer inserts the peer's address into the address vector and opens the
// liveness socket (the higher rank accepts, the lower connects, as in the tcp transport). The
// liveness connection is authenticated like the tcp transport's data sockets: the acceptor sends
// a random challenge, the connector answers with its hello and an HMAC over both keyed with the
// job secret, and the acceptor confirms with one byte only after checking it (a connection that
// fails is dropped and logged; the connector sees end-of-file and reports the rejection).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/crypto.hpp"
#include "common/socket.hpp"
#include "transports/ofi/mr_cache.hpp"
#include "transports/ofi/ofi_connection.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/transport.hpp"

namespace loom::transport::ofi {

struct OfiOptions {
  FabricRequest fabric;
  net::SocketAddress liveness_bind;  // where the liveness listener binds (port 0: ephemeral)
  bool force_registration = false;   // register buffers even when mr_mode does not ask (tests)
  crypto::Secret secret{};           // the job secret: liveness connections prove knowledge of it
  int progress_thread = -1;          // -1: when each rank has a CPU to spare; 0 off; 1 on
  int ranks_on_host = 1;             // for the automatic choice
  int rail = 0;  // which of this rank's endpoints (one per NIC: OfiRails): names its store key
};

class OfiTransport final : public Transport {
 public:
  /// Opens the endpoint and publishes this rank's card under the communicator's prefix.
  static Result<std::unique_ptr<OfiTransport>> create(int rank, int nranks, std::uint64_t comm_id,
                                                      std::shared_ptr<bootstrap::Store> store,
                                                      const OfiOptions& options);
  ~OfiTransport() override;
  OfiTransport(const OfiTransport&) = delete;
  OfiTransport& operator=(const OfiTransport&) = delete;

  [[nodiscard]] const ProviderInfo& provider() const { return fabric_->info(); }
  [[nodiscard]] const MrCache& registrations() const { return *mrs_; }
  [[nodiscard]] bool has_progress_thread() const { return progress_ != nullptr; }
  /// Lets connections carry device buffers registered as `iface` (FI_HMEM_CUDA, or
  /// FI_HMEM_SYSTEM to simulate it on host memory), after checking that the provider registers
  /// `probe` (`bytes` of device memory on `device`). Call before the first device-buffer request.
  Status enable_device_memory(fi_hmem_iface iface, const void* probe, std::size_t bytes,
                              int device);
  /// The same for the device runtime named `runtime`: "cuda" registers as FI_HMEM_CUDA, any
  /// other (host-sim) as FI_HMEM_SYSTEM.
  Status enable_device_memory(std::string_view runtime, const void* probe, std::size_t bytes,
                              int device) override;
  [[nodiscard]] std::optional<DeviceMemorySupport> device_memory_support() const override {
    return DeviceMemorySupport{provider().provider, provider().hmem};
  }
  [[nodiscard]] const DeviceMemoryMode& device_memory() const { return device_; }
  /// Connections to `peers`, establishing missing ones.
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] Connection* get(int peer) const override;
  [[nodiscard]] std::string_view name() const override { return "ofi"; }

 private:
  OfiTransport(int rank, int nranks, std::uint64_t comm_id,
               std::shared_ptr<bootstrap::Store> store);
  struct Card {
    std::string provider;
    net::SocketAddress liveness;
    std::vector<std::uint8_t> name;
  };
  Status publish();
  Result<Card> card_of(int peer, Deadline deadline);
  Status connect_to(int peer, Deadline deadline);
  Status accept_from(int peer, Deadline deadline);
  Status accept_one(Deadline deadline);
  Status add_connection(int peer, const Card& card, net::Fd liveness);
  [[nodiscard]] std::string key(int rank) const;

  int rank_;
  std::uint64_t comm_id_;
  int rail_ = 0;
  crypto::Secret secret_{};
  std::shared_ptr<bootstrap::Store> store_;
  std::vector<std::unique_ptr<OfiConnection>> conns_;  // destroyed last
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<MrCache> mrs_;  // destroyed before the fabric's domain
  DeviceMemoryMode device_;
  net::Fd listener_;
  net::SocketAddress liveness_address_;
  std::map<int, net::Fd> accepted_;        // liveness sockets by peer, awaiting ensure()
  ExecutorFirstMutex lock_;                // the endpoint's and the connections' (progress thread)
  std::unique_ptr<OfiProgress> progress_;  // destroyed first: its thread uses all of the above
};

}  // namespace loom::transport::ofi
