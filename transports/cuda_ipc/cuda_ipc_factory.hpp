// The cuda_ipc transport's factory for the transport registry (transports/registry.hpp): a kind
// that carries device buffers only, between ranks of one host, made by the direct path
// (src/device/direct_path.hpp) when a device runtime is active.
#pragma once

#include "transports/registry.hpp"

namespace loom::transport::cuda_ipc {

/// A CudaIpcTransport for ctx.rank over ctx.device (collective over ctx.store under
/// ctx.store_prefix, within ctx.deadline): FIFOs to the ranks of its host (ctx.host_ids, every
/// rank's; all on one host when they are equal). Null, with the reason logged, when some rank's
/// LOOM_TRANSPORTS excludes cuda_ipc (ctx.allowed is this rank's say). LOOM_NVML_LIBRARY names
/// the library that labels the links in the logs.
Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx);

/// cuda_ipc's row in the transport registry.
Entry registry_entry();

}  // namespace loom::transport::cuda_ipc
