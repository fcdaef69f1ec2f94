#include "transports/ofi/ofi_fabric.hpp"

#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "log/log.hpp"
#include "transports/ofi/fabric_loader.hpp"

namespace loom::transport::ofi {
namespace {

constexpr std::uint32_t kApiVersion = FI_VERSION(1, 9);
constexpr std::array<const char*, 3> kPreferred = {"efa", "tcp;ofi_rxm", "shm"};

struct InfoDeleter {
  void operator()(fi_info* i) const {
    if (i != nullptr) fi_freeinfo(i);
  }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

std::atomic<std::uint64_t> g_getinfo_calls{0};

// Tagged, reliable-datagram endpoints whose sends to one peer match in order.
InfoPtr make_hints(const std::string& provider, bool hmem) {
  InfoPtr h(fi_allocinfo());
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_TAGGED | FI_SEND | FI_RECV | (hmem ? FI_HMEM : 0);
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!provider.empty()) h->fabric_attr->prov_name = ::strdup(provider.c_str());
  return h;
}

// Whether `i` is on the domain named `want`: its name, or its name up to a provider's suffix
// ("rdmap16s27" names EFA's "rdmap16s27-rdm"). Empty `want`: any.
bool on_domain(const fi_info* i, const std::string& want) {
  if (want.empty()) return true;
  const std::string have = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
  return have == want || have.rfind(want + "-", 0) == 0;
}

InfoPtr get_info_with(const std::string& provider, const std::string& node,
                      const std::string& domain, bool hmem) {
  if (!fabric_library_loaded()) return nullptr;
  // The domain is not a hint: some providers (tcp;ofi_rxm) ignore it and list every domain, so
  // the matching entry is picked here.
  InfoPtr hints = make_hints(provider, hmem);
  fi_info* out = nullptr;
  const char* n = node.empty() ? nullptr : node.c_str();
  g_getinfo_calls.fetch_add(1, std::memory_order_relaxed);
  int rc = fi_getinfo(kApiVersion, n, nullptr, n != nullptr ? FI_SOURCE : 0, hints.get(), &out);
  InfoPtr all(rc == 0 ? out : nullptr);
  if (!all || domain.empty()) return all;
  for (const fi_info* i = all.get(); i != nullptr; i = i->next)
    if (on_domain(i, domain)) return InfoPtr(fi_dupinfo(i));
  return nullptr;
}

// The first matching fi_info (with FI_HMEM when the provider has it), or null.
InfoPtr get_info(const std::string& provider, const std::string& node,
                 const std::string& domain = {}) {
  for (bool hmem : {true, false})
    if (InfoPtr i = get_info_with(provider, node, domain, hmem)) return i;
  return nullptr;
}

ProviderInfo describe_info(const fi_info* i) {
  ProviderInfo p;
  p.provider = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "?";
  p.fabric = i->fabric_attr->name != nullptr ? i->fabric_attr->name : "?";
  p.domain = i->domain_attr->name != nullptr ? i->domain_attr->name : "?";
  p.hmem = (i->caps & FI_HMEM) != 0;
  p.mr_mode = static_cast<std::uint64_t>(i->domain_attr->mr_mode);
  p.mr_local = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  p.max_msg_size = i->ep_attr->max_msg_size;
  p.inject_size = i->tx_attr->inject_size;
  return p;
}

bool socket_based(const std::string& provider) {
  return provider.find("tcp") != std::string::npos || provider.find("sockets") != std::string::npos;
}

}  // namespace

std::string fi_error(const char* call, int rc) {
  return fmt::format("{}: {} ({})", call, fi_strerror(-rc), rc);
}

std::string ProviderInfo::describe() const {
  return fmt::format("provider {}, fabric {}, domain {}{}{}", provider, fabric, domain,
                     hmem ? ", FI_HMEM" : "", mr_local ? ", FI_MR_LOCAL" : "");
}

bool efa_device_present() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it("/sys/class/infiniband", ec), end; !ec && it != end;
       it.increment(ec)) {
    fs::path driver = fs::read_symlink(it->path() / "device" / "driver", ec);
    if (!ec && driver.filename() == "efa") return true;
    ec.clear();
  }
  return false;
}

std::uint64_t getinfo_calls() {
  return g_getinfo_calls.load(std::memory_order_relaxed);
}

std::vector<std::string> list_domains(const std::string& provider) {
  std::vector<std::string> out;
  for (bool hmem : {true, false}) {
    InfoPtr all = get_info_with(provider, "", "", hmem);
    for (const fi_info* i = all.get(); i != nullptr; i = i->next) {
      const ProviderInfo p = describe_info(i);
      // Loopback reaches no other host: never a rail.
      if (p.domain == "lo" || p.fabric.rfind("127.", 0) == 0 || p.fabric.rfind("::1", 0) == 0)
        continue;
      if (std::find(out.begin(), out.end(), p.domain) == out.end()) out.push_back(p.domain);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ProviderInfo> list_providers() {
  std::vector<ProviderInfo> out;
  for (bool hmem : {true, false}) {
    InfoPtr all = get_info_with("", "", "", hmem);
    for (const fi_info* i = all.get(); i != nullptr; i = i->next) {
      ProviderInfo p = describe_info(i);
      if (p.provider.rfind("ofi_", 0) == 0) continue;  // bare utility providers
      auto same = [&](const ProviderInfo& q) { return q.provider == p.provider; };
      if (std::none_of(out.begin(), out.end(), same)) out.push_back(p);
    }
  }
  auto rank = [](const ProviderInfo& p) {
    auto it = std::find(kPreferred.begin(), kPreferred.end(), p.provider);
    return static_cast<std::size_t>(it - kPreferred.begin());
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const ProviderInfo& a, const ProviderInfo& b) { return rank(a) < rank(b); });
  return out;
}

Result<ProviderInfo> probe_provider(const FabricRequest& request) {
  if (!fabric_library_loaded())
    return make_error(ErrorCode::SystemError, "cannot load libfabric: {}", fabric_library_error());
  std::vector<std::string> tries;
  if (!request.provider.empty())
    tries.push_back(request.provider);
  else
    tries.assign(kPreferred.begin(), kPreferred.end());
  for (const auto& prov : tries) {
    InfoPtr i = get_info(prov, socket_based(prov) ? request.node : "", request.domain);
    if (i) return describe_info(i.get());
  }
  std::string have;
  for (const auto& p : list_providers()) have += (have.empty() ? "" : ", ") + p.provider;
  if (have.empty()) have = "none";
  return make_error(ErrorCode::SystemError,
                    "libfabric provider {}{} is not available on this host (no tagged FI_EP_RDM "
                    "endpoint from fi_getinfo; providers with one: {})",
                    request.provider.empty() ? std::string("efa, tcp;ofi_rxm or shm")
                                             : "'" + request.provider + "'",
                    request.domain.empty() ? std::string() : " on domain '" + request.domain + "'",
                    have);
}

Result<std::unique_ptr<Fabric>> Fabric::open(const FabricRequest& request) {
  LOOM_ASSIGN_OR_RETURN(ProviderInfo chosen, probe_provider(request));
  InfoPtr info =
      get_info(chosen.provider, socket_based(chosen.provider) ? request.node : "", request.domain);
  if (!info) return make_error(ErrorCode::SystemError, "libfabric: {} vanished", chosen.provider);
  std::unique_ptr<Fabric> f(new Fabric());
  f->info_ = describe_info(info.get());
  LOOM_RETURN_IF_ERROR(f->setup(info.release()));
  return f;
}

Status Fabric::setup(fi_info* info) {
  fi_ = info;
  manual_progress_ = fi_->domain_attr->data_progress != FI_PROGRESS_AUTO;
  int rc = fi_fabric(fi_->fabric_attr, &fabric_, nullptr);
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_fabric", rc));
  rc = fi_domain(fabric_, fi_, &domain_, nullptr);
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_domain", rc));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_FD;
  rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (rc != 0) {  // no wait descriptor: the executor polls
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
    wait_fd_ = -1;
  }
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_cq_open", rc));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  rc = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_av_open", rc));
  rc = fi_endpoint(domain_, fi_, &ep_, nullptr);
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_endpoint", rc));
  if ((rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (rc = fi_ep_bind(ep_, &av_->fid, 0)) != 0 || (rc = fi_enable(ep_)) != 0)
    return make_error(ErrorCode::SystemError, "{}", fi_error("fi_ep_bind/fi_enable", rc));
  std::size_t len = 0;
  (void)fi_getname(&ep_->fid, nullptr, &len);
  name_.resize(len);
  rc = fi_getname(&ep_->fid, name_.data(), &len);
  if (rc != 0) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_getname", rc));
  name_.resize(len);
  return Status::ok();
}

Fabric::~Fabric() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (fi_ != nullptr) fi_freeinfo(fi_);
}

Result<fi_addr_t> Fabric::insert(const std::vector<std::uint8_t>& peer_name) {
  fi_addr_t addr = FI_ADDR_UNSPEC;
  int rc = fi_av_insert(av_, peer_name.data(), 1, &addr, 0, nullptr);
  if (rc != 1) return make_error(ErrorCode::SystemError, "{}", fi_error("fi_av_insert", rc));
  return addr;
}

Result<int> Fabric::progress() {
  std::array<fi_cq_tagged_entry, 16> entries{};
  int handled = 0;
  for (;;) {
    ssize_t n = fi_cq_read(cq_, entries.data(), entries.size());
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        auto* ctx = static_cast<OpContext*>(entries[static_cast<std::size_t>(i)].op_context);
        ctx->complete(ctx, &entries[static_cast<std::size_t>(i)], nullptr);
      }
      handled += static_cast<int>(n);
      if (static_cast<std::size_t>(n) < entries.size()) return handled;
      continue;
    }
    if (n == -FI_EAGAIN) return handled;
    if (n != -FI_EAVAIL)
      return make_error(ErrorCode::SystemError, "{}", fi_error("fi_cq_read", static_cast<int>(n)));
    fi_cq_err_entry err{};
    ssize_t e = fi_cq_readerr(cq_, &err, 0);
    if (e < 0) continue;
    auto* ctx = static_cast<OpContext*>(err.op_context);
    if (ctx != nullptr) ctx->complete(ctx, nullptr, &err);
    ++handled;
  }
}

bool Fabric::prepare_wait(std::vector<pollfd>& fds) {
  // With manual data progress (efa, ofi_rxm, shm) protocol steps that complete no request yet
  // (a rendezvous read request, say) need fi_cq_read calls but need not wake the wait
  // descriptor: sleeping could stall both sides. Such providers are polled.
  // Polling yields the CPU each round, so a rank waiting for a peer on the same cores lets it
  // run (hosts with more ranks than cores).
  if (wait_fd_ < 0 || manual_progress_) {
    std::this_thread::yield();
    return false;
  }
  fid* f = &cq_->fid;
  if (fi_trywait(fabric_, &f, 1) != FI_SUCCESS) return false;
  fds.push_back({wait_fd_, POLLIN, 0});
  return true;
}

}  // namespace loom::transport::ofi
