#include "core/peer_transports.hpp"

#include <algorithm>

#include "common/strings.hpp"

namespace loom::detail {

PeerTransports::PeerTransports(int rank, std::vector<TransportKind> choice,
                               std::unique_ptr<transport::tcp::TcpTransport> tcp,
                               std::unique_ptr<transport::shm::ShmTransport> shm,
                               std::unique_ptr<transport::ofi::OfiTransport> ofi)
    : rank_(rank), choice_(std::move(choice)), ofi_(ofi.get()) {
  by_kind_[static_cast<std::size_t>(TransportKind::Tcp)] = std::move(tcp);
  by_kind_[static_cast<std::size_t>(TransportKind::Shm)] = std::move(shm);
  by_kind_[static_cast<std::size_t>(TransportKind::Ofi)] = std::move(ofi);
}

PeerTransports::~PeerTransports() {
  for (TransportKind k : {TransportKind::Ofi, TransportKind::Shm, TransportKind::Tcp})
    by_kind_[static_cast<std::size_t>(k)].reset();  // the order they have always closed in
}

Status PeerTransports::ensure(const std::vector<int>& peers, Deadline deadline) {
  std::array<std::vector<int>, kNumTransportKinds> missing;  // by kind
  for (int p : peers)
    if (p != rank_ && get(p) == nullptr) missing[static_cast<std::size_t>(kind(p))].push_back(p);
  // Shared memory first, the network last (the order ranks have always connected in).
  for (TransportKind k : {TransportKind::Shm, TransportKind::Ofi, TransportKind::Tcp}) {
    const auto& group = missing[static_cast<std::size_t>(k)];
    if (group.empty()) continue;
    transport::Transport* t = of(k);
    if (t == nullptr)
      return make_error(ErrorCode::Internal, "rank {}: the {} transport was not created", rank_,
                        to_string(k));
    LOOM_RETURN_IF_ERROR(t->ensure(group, deadline));
  }
  return Status::ok();
}

transport::Connection* PeerTransports::get(int peer) const {
  transport::Transport* t = of(kind(peer));
  return t ? t->get(peer) : nullptr;
}

transport::ofi::FabricRequest ofi_request(const config::Config& cfg,
                                          const net::SocketAddress& data_address) {
  transport::ofi::FabricRequest r;
  r.provider = cfg.get_string("LOOM_OFI_PROVIDER");
  auto hp = net::parse_host_port(data_address.to_string());
  if (hp.is_ok()) r.node = hp->host;
  return r;
}

OfiAvailability probe_ofi(const transport::ofi::FabricRequest& request) {
  OfiAvailability a;
  auto found = transport::ofi::probe_provider(request);
  if (!found.is_ok()) {
    a.why_missing = found.status().message();
    return a;
  }
  a.available = true;
  a.provider = found->provider;
  a.efa = found->provider == "efa";
  if (!a.efa)
    a.why_missing = fmt::format("{}; using {} instead",
                                transport::ofi::probe_provider({"efa", ""}).status().message(),
                                found->provider);
  return a;
}

Result<std::string> effective_transports(int rank, const config::Config& cfg,
                                         const net::SocketAddress& data_address) {
  std::string text = cfg.get_string("LOOM_TRANSPORTS");
  LOOM_ASSIGN_OR_RETURN(auto parsed, parse_transport_list(text));
  if (std::find(parsed.begin(), parsed.end(), TransportKind::Ofi) == parsed.end()) return text;
  const auto entries = comma_tokens(text);  // "ofi" among the positive entries?
  const bool named = std::find(entries.begin(), entries.end(), "ofi") != entries.end();
  bool requested = named || !cfg.get_string("LOOM_OFI_PROVIDER").empty();
  OfiAvailability ofi;  // unrequested ofi runs only on EFA: without a device, skip fi_getinfo
  if (requested || transport::ofi::efa_device_present())
    ofi = probe_ofi(ofi_request(cfg, data_address));
  else
    ofi.why_missing =
        "no EFA device on this host (none bound to the efa driver in "
        "/sys/class/infiniband)";
  LOOM_ASSIGN_OR_RETURN(auto list, resolve_transport_list(rank, text, requested,
                                                          cfg.get_bool("LOOM_OFI_FALLBACK"), ofi));
  return format_transport_list(list);
}

Result<std::unique_ptr<transport::ofi::OfiTransport>> make_ofi_transport(
    int rank, int nranks, std::uint64_t comm_id, const std::shared_ptr<bootstrap::Store>& store,
    const config::Config& cfg, const net::SocketAddress& data_address,
    const std::vector<TransportKind>& choice, const crypto::Secret& secret, int ranks_on_host) {
  std::unique_ptr<transport::ofi::OfiTransport> none;
  bool used = false;
  for (int p = 0; p < nranks; ++p)
    used = used || (p != rank && choice[static_cast<std::size_t>(p)] == TransportKind::Ofi);
  if (!used) return none;
  transport::ofi::OfiOptions o;
  o.fabric = ofi_request(cfg, data_address);
  o.liveness_bind = data_address;
  o.liveness_bind.set_port(0);
  o.secret = secret;
  o.progress_thread = static_cast<int>(cfg.get_int("LOOM_OFI_PROGRESS_THREAD"));
  o.ranks_on_host = ranks_on_host;
  auto t = transport::ofi::OfiTransport::create(rank, nranks, comm_id, store, o);
  if (!t.is_ok())
    return t.status().with_context(fmt::format("rank {}: opening the ofi transport", rank));
  return t;
}

}  // namespace loom::detail
