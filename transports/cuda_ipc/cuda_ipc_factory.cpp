#include "transports/cuda_ipc/cuda_ipc_factory.hpp"

#include <algorithm>

#include "transports/cuda_ipc/cuda_ipc_transport.hpp"

namespace loom::transport::cuda_ipc {

Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx) {
  if (ctx.device == nullptr)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: the cuda_ipc transport needs a device runtime", ctx.rank);
  if (ctx.host_ids.size() != static_cast<std::size_t>(ctx.nranks) || ctx.rank < 0 ||
      ctx.rank >= ctx.nranks)
    return make_error(ErrorCode::Internal,
                      "rank {}: the cuda_ipc transport needs every rank's host ({} given for {})",
                      ctx.rank, ctx.host_ids.size(), ctx.nranks);
  CudaIpcSetup s;
  s.dev = ctx.device;
  s.store = ctx.store;
  s.prefix = ctx.store_prefix;
  s.comm_id = ctx.comm_id;
  s.rank = ctx.rank;
  s.nranks = ctx.nranks;
  s.host_id = ctx.host_ids[static_cast<std::size_t>(ctx.rank)];
  s.allowed = ctx.allowed;
  const bool one_host = std::all_of(ctx.host_ids.begin(), ctx.host_ids.end(),
                                    [&](const std::string& h) { return h == s.host_id; });
  if (!one_host) s.host_ids = ctx.host_ids;
  if (ctx.config != nullptr) {
    s.nvml_library = ctx.config->get_string("LOOM_NVML_LIBRARY");
    s.slot_bytes = static_cast<std::size_t>(ctx.config->get_size("LOOM_CUDA_IPC_SLOT_SIZE"));
    s.stages = ctx.config->get_string("LOOM_CUDA_IPC_ROUTE") == "staged";
    LOOM_ASSIGN_OR_RETURN(s.peer_read,
                          parse_peer_read_mode(ctx.config->get_string("LOOM_CUDA_IPC_PEER_READ")));
  }
  if (!one_host && s.peer_read == PeerReadMode::On)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_CUDA_IPC_PEER_READ=on, but the ranks span hosts (the "
                      "peer-read route serves the ranks of one host)",
                      ctx.rank);
  LOOM_ASSIGN_OR_RETURN(auto t, CudaIpcTransport::create(s, ctx.deadline));
  return std::unique_ptr<Transport>(std::move(t));
}

Entry registry_entry() {
  return {.create = &make_transport};
}

}  // namespace loom::transport::cuda_ipc
