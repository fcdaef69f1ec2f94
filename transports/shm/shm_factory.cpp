#include "transports/shm/shm_factory.hpp"

#include "transports/shm/shm_policy.hpp"

namespace loom::transport::shm {

Result<ShmOptions> options_from(const config::Config& cfg) {
  ShmOptions o;
  o.slot_bytes = cfg.get_size("LOOM_SHM_SLOT_SIZE");
  o.nslots = static_cast<std::size_t>(cfg.get_int("LOOM_SHM_SLOTS"));
  LOOM_ASSIGN_OR_RETURN(o.single_copy, parse_single_copy(cfg.get_string("LOOM_SHM_SINGLE_COPY")));
  LOOM_ASSIGN_OR_RETURN(o.single_copy_min, single_copy_min_from(cfg));      // 0: auto
  LOOM_ASSIGN_OR_RETURN(const std::size_t max, single_copy_max_from(cfg));  // 0: auto
  o.single_copy_max = {max, max};
  LOOM_ASSIGN_OR_RETURN(o.slot_order, parse_slot_order(cfg.get_string("LOOM_SHM_SLOT_ORDER")));
  LOOM_ASSIGN_OR_RETURN(o.segments, parse_segment_kind(cfg.get_string("LOOM_SHM_SEGMENTS")));
  o.test_kill_after_create = cfg.get_bool("LOOM_TEST_SHM_KILL_AFTER_CREATE");
  return o;
}

ShmOptions resolve_auto(ShmOptions o, double cpu_load, double host_cpu_load) {
  if (o.single_copy_min == 0) o.single_copy_min = auto_single_copy_min(cpu_load);
  if (o.single_copy_max.any == 0) o.single_copy_max = auto_single_copy_max(o.slot_bytes, cpu_load);
  // Three or more ranks on a CPU evict each other's channels from its caches: a channel's
  // message is best written where the last one was. With fewer, the slots fit, and writing the
  // slot the receiver has just read costs more (docs/algorithms.md, shared memory).
  if (o.slot_order == SlotOrder::Auto)
    o.slot_order = auto_reuse_slots(host_cpu_load) ? SlotOrder::Reuse : SlotOrder::Rotate;
  return o;
}

bool buffered_ring_sends(const ShmOptions& o, double host_cpu_load) {
  // A ring's send waits for its receiver only if single copy; when a neighbour shares a CPU,
  // that wait holds the sender too, even one with a CPU of its own (3 ranks on 2 CPUs, 8 MiB:
  // 7.2-9.2 ms with the lone rank's sends single copy, 4.4-4.8 buffered).
  return o.single_copy_min == 0 && host_cpu_load > 1;
}

Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(ShmOptions parsed, options_from(*ctx.config));
  const ShmOptions o = resolve_auto(parsed, ctx.cpu_load, ctx.host_cpu_load);
  LOOM_ASSIGN_OR_RETURN(auto t,
                        ShmTransport::create(ctx.rank, ctx.nranks, ctx.comm_id, ctx.store, o));
  if (ctx.peer_check) t->set_peer_check(ctx.peer_check);
  t->set_plan_hints({buffered_ring_sends(parsed, ctx.host_cpu_load)});
  return std::unique_ptr<Transport>(std::move(t));
}

Result<CostFacts> cost_facts(const config::Config& cfg) {
  LOOM_ASSIGN_OR_RETURN(const ShmOptions o, options_from(cfg));
  CostFacts f;
  f.single_copy_min =
      o.single_copy == SingleCopy::Off ? 1e30 : static_cast<double>(o.single_copy_min);
  f.auto_single_copy_min = static_cast<double>(kSingleCopyMin);
  f.auto_shared_cpu_single_copy_min = static_cast<double>(kSharedCpuSingleCopyMin);
  f.reuse_slots_above = kReuseSlotsAbove;
  return f;
}

namespace {

Status check_settings(const config::Config& cfg) {
  return options_from(cfg).status();
}

}  // namespace

Entry registry_entry() {
  return {.create = &make_transport,
          .check_settings = &check_settings,
          .cleanup_after_failed_setup = &remove_orphans,
          .cost_facts = &cost_facts};
}

}  // namespace loom::transport::shm
