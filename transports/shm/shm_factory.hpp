// The shared-memory transport's settings (LOOM_SHM_*) and its factory for the transport
// registry (transports/registry.hpp).
#pragma once

#include "config/config.hpp"
#include "transports/registry.hpp"
#include "transports/shm/shm_transport.hpp"

namespace loom::transport::shm {

/// The LOOM_SHM_* settings, with auto values left as parsed (single_copy_min 0, SlotOrder::Auto).
Result<ShmOptions> options_from(const config::Config& cfg);

/// `o` with its automatic values chosen (shm_policy.hpp) for a rank whose busiest CPU runs
/// `cpu_load` ranks on a host whose busiest CPU runs `host_cpu_load`.
ShmOptions resolve_auto(ShmOptions o, double cpu_load, double host_cpu_load);

/// Whether ring sends should go through the slots, never single copy (PlanHints): when
/// LOOM_SHM_SINGLE_COPY_MIN is auto (`o` as parsed) and some CPU of this rank's host runs
/// several ranks.
bool buffered_ring_sends(const ShmOptions& o, double host_cpu_load);

/// A ShmTransport for ctx.rank, with the LOOM_SHM_* settings of ctx.config and their automatic
/// values chosen from ctx's CPU loads (shm_policy.hpp).
Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx);

/// What the cost model must know of shm's policy (select::Tuning's single_copy_bytes and shm).
Result<CostFacts> cost_facts(const config::Config& cfg);

/// shm's row in the transport registry: make_transport, its settings' check (options_from),
/// the cleanup of dead ranks' /dev/shm names (remove_orphans) and cost_facts.
Entry registry_entry();

}  // namespace loom::transport::shm
