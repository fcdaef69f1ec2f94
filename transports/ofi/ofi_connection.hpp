// A Connection to one peer over a shared libfabric RDM endpoint: tagged sends and receives of
// [Header | payload] (see wire.hpp), posted in order, re-posted in order after -FI_EAGAIN
// (back-pressure), completed from the endpoint's completion queue when test() makes progress.
// RDM endpoints hide a peer's death, so each connection also holds a TCP "liveness" socket that
// carries no data: its end-of-file says the peer has gone.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

#include "common/deadline.hpp"
#include "common/executor_first_mutex.hpp"
#include "common/socket.hpp"
#include "transports/connection.hpp"
#include "transports/ofi/mr_cache.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/ofi/ofi_progress.hpp"
#include "transports/ofi/wire.hpp"
#include "transports/request_table.hpp"

namespace loom::transport::ofi {

/// How device buffers (MemoryKind::Device) are registered: off until the transport has checked
/// that the provider takes them (OfiTransport::enable_device_memory).
struct DeviceMemoryMode {
  bool enabled = false;
  fi_hmem_iface iface = FI_HMEM_SYSTEM;  // FI_HMEM_CUDA; FI_HMEM_SYSTEM when simulated
};

class OfiConnection final : public Connection {
 public:
  /// With `progress` (a progress thread), every call takes `lock` (the fabric's lock, shared
  /// with the thread); without, `lock` is not used. `device` outlives the connection.
  OfiConnection(int self_rank, int peer, std::uint64_t comm_id, Fabric& fabric, MrCache& mrs,
                fi_addr_t addr, net::Fd liveness, const DeviceMemoryMode& device,
                OfiProgress* progress = nullptr, ExecutorFirstMutex* lock = nullptr);
  ~OfiConnection() override;
  OfiConnection(const OfiConnection&) = delete;
  OfiConnection& operator=(const OfiConnection&) = delete;

  [[nodiscard]] Caps caps() const override;
  [[nodiscard]] int peer() const override { return peer_; }
  [[nodiscard]] std::string name() const override { return "ofi"; }
  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  bool prepare_wait(std::vector<pollfd>& fds) override;

 private:
  struct Op;
  struct Ctx {
    OpContext base{};  // first: the completion hands &base back
    OfiConnection* conn = nullptr;
    Op* op = nullptr;
    std::uint64_t id = 0;
  };
  struct Op {
    std::uint64_t id = 0;  // 0: free slot
    bool is_send = false;
    bool posted = false;
    bool complete = false;
    std::uint8_t* data = nullptr;
    std::size_t len = 0;
    MemRegion region;  // the buffer `data` lies in (device memory is registered as a whole)
    Tag tag;           // send: the tag sent; recv: the tag expected
    Status error;
    Ctx ctx;
  };
  static constexpr std::size_t kTable = 1024;

  Result<Request> post(bool is_send, const MemRegion& region, std::size_t off, std::size_t len,
                       const Tag& tag);
  Result<bool> try_post(Op& op);
  Result<void*> payload_desc(const Op& op);
  std::unique_lock<std::mutex> lock();
  Status flush_pending();
  Status progress();
  Status check_peer();
  static void on_complete(OpContext* ctx, const fi_cq_tagged_entry* entry,
                          const fi_cq_err_entry* err);
  void complete(Op& op, const fi_cq_tagged_entry* entry, const fi_cq_err_entry* err);
  [[nodiscard]] Status check_header(const Op& op, std::size_t received) const;
  Status fail(Status why);
  [[nodiscard]] std::string who() const;

  int self_;
  int peer_;
  std::uint64_t comm_id_;
  Fabric& fabric_;
  MrCache& mrs_;
  const DeviceMemoryMode& device_;
  fi_addr_t addr_;
  net::Fd liveness_;
  RequestTable<Op, kTable> ops_;
  std::vector<Header> headers_;  // by request slot; sent or received in front of each payload
  std::deque<Op*> pending_;      // not yet accepted by the provider (-FI_EAGAIN), in order
  std::size_t outstanding_ = 0;
  Clock::time_point next_liveness_check_{};
  Clock::time_point peer_gone_{};
  bool peer_gone_seen_ = false;
  Status broken_;
  OfiProgress* progress_ = nullptr;
  ExecutorFirstMutex* lock_ = nullptr;
};

}  // namespace loom::transport::ofi
