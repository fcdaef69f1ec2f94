#include "transports/registry.hpp"

#include "transports/cuda_ipc/cuda_ipc_factory.hpp"
#include "transports/ofi/ofi_factory.hpp"
#include "transports/shm/shm_factory.hpp"
#include "transports/tcp/tcp_factory.hpp"

namespace loom::transport {
namespace {

constexpr std::array<std::string_view, kNumTransportKinds> kNames = {"shm", "tcp", "ofi",
                                                                     "cuda_ipc"};

std::size_t index(TransportKind k) {
  return static_cast<std::size_t>(k);
}

}  // namespace

std::string_view to_string(TransportKind k) {
  return index(k) < kNames.size() ? kNames[index(k)] : "?";
}

std::optional<TransportKind> kind_named(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<TransportKind>(i);
  return std::nullopt;
}

Status Registry::add(TransportKind kind, Entry e) {
  if (index(kind) >= entries_.size() || e.create == nullptr)
    return make_error(ErrorCode::Internal, "registering transport '{}': no such kind or factory",
                      to_string(kind));
  if (entries_[index(kind)].create != nullptr)
    return make_error(ErrorCode::Internal, "the {} transport is registered twice", to_string(kind));
  entries_[index(kind)] = e;
  return Status::ok();
}

const Entry* Registry::entry(TransportKind kind) const {
  if (index(kind) >= entries_.size() || entries_[index(kind)].create == nullptr) return nullptr;
  return &entries_[index(kind)];
}

bool Registry::has(TransportKind kind) const {
  return entry(kind) != nullptr;
}

Result<std::unique_ptr<Transport>> Registry::create(TransportKind kind,
                                                    const CreateContext& ctx) const {
  const Entry* e = entry(kind);
  if (e == nullptr)
    return make_error(ErrorCode::Internal, "rank {}: no factory is registered for the {} transport",
                      ctx.rank, to_string(kind));
  return e->create(ctx);
}

Result<std::vector<std::unique_ptr<Transport>>> Registry::prepare(const CreateContext& ctx) const {
  std::vector<std::unique_ptr<Transport>> out;
  for (const Entry& e : entries_) {
    if (e.create == nullptr || e.prepare == nullptr) continue;
    LOOM_ASSIGN_OR_RETURN(auto t, e.prepare(ctx));
    out.push_back(std::move(t));
  }
  return out;
}

Status Registry::complete(Transport& prepared, const CreateContext& ctx) const {
  auto k = kind_named(prepared.name());
  const Entry* e = k ? entry(*k) : nullptr;
  if (e == nullptr)
    return make_error(ErrorCode::Internal, "rank {}: transport '{}' is not registered", ctx.rank,
                      prepared.name());
  return e->complete ? e->complete(prepared, ctx) : Status::ok();
}

Status Registry::check_settings(const config::Config& cfg) const {
  for (const Entry& e : entries_)
    if (e.create != nullptr && e.check_settings != nullptr)
      LOOM_RETURN_IF_ERROR(e.check_settings(cfg));
  return Status::ok();
}

void Registry::cleanup_after_failed_setup(int rank, std::uint64_t comm_id) const {
  for (const Entry& e : entries_)
    if (e.create != nullptr && e.cleanup_after_failed_setup != nullptr)
      e.cleanup_after_failed_setup(rank, comm_id);
}

Availability Registry::probe(TransportKind kind, const config::Config& cfg,
                             const net::SocketAddress& data_address, bool requested) const {
  const Entry* e = entry(kind);
  if (e == nullptr) {
    Availability none;
    none.why_missing = fmt::format("the {} transport is not registered", to_string(kind));
    return none;
  }
  if (e->probe == nullptr) return {true, true, std::string(to_string(kind)), ""};
  return e->probe(cfg, data_address, requested);
}

Result<CostFacts> Registry::cost_facts(TransportKind kind, const config::Config& cfg) const {
  const Entry* e = entry(kind);
  if (e == nullptr || e->cost_facts == nullptr) return CostFacts{};
  return e->cost_facts(cfg);
}

// Adding a transport: its folder, and one line here.
Status register_builtin_transports(Registry& r) {
  LOOM_RETURN_IF_ERROR(r.add(TransportKind::Shm, shm::registry_entry()));
  LOOM_RETURN_IF_ERROR(r.add(TransportKind::Tcp, tcp::registry_entry()));
  LOOM_RETURN_IF_ERROR(r.add(TransportKind::Ofi, ofi::registry_entry()));
  return r.add(TransportKind::CudaIpc, cuda_ipc::registry_entry());
}

const Registry& builtin_transports() {
  static const Registry r = [] {
    Registry built;
    (void)register_builtin_transports(built);  // cannot fail: four kinds, once each
    return built;
  }();
  return r;
}

}  // namespace loom::transport
