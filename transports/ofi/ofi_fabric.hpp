// One libfabric endpoint and what it needs: provider discovery (fi_getinfo), fabric, domain,
// address vector, completion queue and an FI_EP_RDM endpoint. Completions are dispatched to the
// requests that posted them through their context (see OpContext); progress is manual, driven by
// whoever tests a request.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace loom::transport::ofi {

/// What the caller asks for. `provider` empty: efa if present, else tcp;ofi_rxm, else shm.
struct FabricRequest {
  FabricRequest() = default;
  explicit(false) FabricRequest(std::string p, std::string n = {}, std::string d = {})
      : provider(std::move(p)), node(std::move(n)), domain(std::move(d)) {}
  std::string provider;
  std::string node;    // local address for socket-based providers (FI_SOURCE); empty: any
  std::string domain;  // the domain (NIC: an EFA device, an interface) by name; empty: any
};

/// What a provider offers, for logs and `loom-info --transports`.
struct ProviderInfo {
  std::string provider;   // "tcp;ofi_rxm"
  std::string fabric;     // "127.0.0.1/32"
  std::string domain;     // "lo"
  bool hmem = false;      // FI_HMEM: device memory can be registered
  bool mr_local = false;  // FI_MR_LOCAL: every buffer must be registered
  std::uint64_t mr_mode = 0;
  std::size_t max_msg_size = 0;
  std::size_t inject_size = 0;
  [[nodiscard]] std::string describe() const;
};

/// Providers that offer tagged FI_EP_RDM endpoints on this host, best first (efa, tcp;ofi_rxm,
/// shm, then any other), one entry per provider.
std::vector<ProviderInfo> list_providers();
/// The domains (NICs) `provider` offers tagged FI_EP_RDM endpoints on, by name, sorted, without
/// loopback ones (LOOM_OFI_DOMAINS=all: EFA devices, or a socket provider's interfaces).
std::vector<std::string> list_domains(const std::string& provider);
/// The provider the request resolves to, or an error saying why none fits (the reason is fit
/// for a WARN: which provider was asked for and what exists instead).
Result<ProviderInfo> probe_provider(const FabricRequest& request);
/// Whether this host has an EFA device (an RDMA device bound to the efa driver under
/// /sys/class/infiniband). Reads sysfs only: cheap, unlike fi_getinfo, whose first call loads
/// every provider (~0.4 s). Lets init skip the probe when ofi would not be used anyway.
bool efa_device_present();
/// How many fi_getinfo calls this process has made (tests check that init avoids them).
std::uint64_t getinfo_calls();

/// Placed first in every posted operation's context; the completion hands it back.
struct OpContext {
  fi_context2 fi;  // the provider may use this (FI_CONTEXT/FI_CONTEXT2 mode)
  void (*complete)(OpContext* self, const fi_cq_tagged_entry* entry, const fi_cq_err_entry* err);
};

class Fabric {
 public:
  static Result<std::unique_ptr<Fabric>> open(const FabricRequest& request);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  [[nodiscard]] const ProviderInfo& info() const { return info_; }
  [[nodiscard]] fid_ep* ep() const { return ep_; }
  [[nodiscard]] fid_domain* domain() const { return domain_; }
  /// This endpoint's address, for the peers' address vectors.
  [[nodiscard]] const std::vector<std::uint8_t>& name() const { return name_; }
  /// Inserts a peer's address; returns its fi_addr_t.
  Result<fi_addr_t> insert(const std::vector<std::uint8_t>& peer_name);
  /// Reads completions and dispatches them; returns how many were handled.
  Result<int> progress();
  /// Adds the completion queue's wait descriptor when it is safe to block (fi_trywait, and only
  /// for providers with automatic data progress); false when the caller must keep polling.
  bool prepare_wait(std::vector<struct pollfd>& fds);

 private:
  Fabric() = default;
  Status setup(fi_info* info);

  ProviderInfo info_;
  fi_info* fi_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  int wait_fd_ = -1;
  bool manual_progress_ = true;
  std::vector<std::uint8_t> name_;
};

/// "fi_tsendv: Resource temporarily unavailable (-11)".
std::string fi_error(const char* call, int rc);

}  // namespace loom::transport::ofi
