#include "transports/registry.hpp"

#include "transports/ofi/ofi_factory.hpp"
#include "transports/shm/shm_factory.hpp"
#include "transports/tcp/tcp_factory.hpp"

namespace loom::transport {
namespace {

constexpr std::array<std::string_view, kNumTransportKinds> kNames = {"shm", "tcp", "ofi"};

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

Status Registry::add(TransportKind kind, Factory make) {
  if (index(kind) >= factories_.size() || make == nullptr)
    return make_error(ErrorCode::Internal, "registering transport '{}': no such kind or factory",
                      to_string(kind));
  if (factories_[index(kind)] != nullptr)
    return make_error(ErrorCode::Internal, "the {} transport is registered twice", to_string(kind));
  factories_[index(kind)] = make;
  return Status::ok();
}

bool Registry::has(TransportKind kind) const {
  return index(kind) < factories_.size() && factories_[index(kind)] != nullptr;
}

Result<std::unique_ptr<Transport>> Registry::create(TransportKind kind,
                                                    const CreateContext& ctx) const {
  if (!has(kind))
    return make_error(ErrorCode::Internal, "rank {}: no factory is registered for the {} transport",
                      ctx.rank, to_string(kind));
  return factories_[index(kind)](ctx);
}

Status register_builtin_transports(Registry& r) {
  LOOM_RETURN_IF_ERROR(r.add(TransportKind::Shm, &shm::make_transport));
  LOOM_RETURN_IF_ERROR(r.add(TransportKind::Tcp, &tcp::make_transport));
  return r.add(TransportKind::Ofi, &ofi::make_transport);
}

const Registry& builtin_transports() {
  static const Registry r = [] {
    Registry built;
    (void)register_builtin_transports(built);  // cannot fail: three kinds, once each
    return built;
  }();
  return r;
}

}  // namespace loom::transport
