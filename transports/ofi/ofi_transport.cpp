#include "transports/ofi/ofi_transport.hpp"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <span>

#include "log/log.hpp"
#include "transports/connect_order.hpp"

namespace loom::transport::ofi {
namespace {

constexpr std::uint32_t kLivenessMagic = 0x4c4f4c56;  // "LOLV"
constexpr const char* kLivenessDomain = "loom-ofi-liveness-v1";
constexpr std::uint8_t kAccepted = 0xac;

struct Hello {
  std::uint32_t magic = kLivenessMagic;
  std::int32_t from_rank = -1;
  std::uint64_t comm_id = 0;
  std::int32_t to_rank = -1;
  std::uint32_t reserved = 0;
};

template <typename T>
void put(bootstrap::Bytes& out, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

OfiTransport::OfiTransport(int rank, int nranks, std::uint64_t comm_id,
                           std::shared_ptr<bootstrap::Store> store)
    : rank_(rank),
      comm_id_(comm_id),
      store_(std::move(store)),
      conns_(static_cast<std::size_t>(nranks)) {}

OfiTransport::~OfiTransport() = default;

Result<std::unique_ptr<OfiTransport>> OfiTransport::create(int rank, int nranks,
                                                           std::uint64_t comm_id,
                                                           std::shared_ptr<bootstrap::Store> store,
                                                           const OfiOptions& options) {
  std::unique_ptr<OfiTransport> t(new OfiTransport(rank, nranks, comm_id, std::move(store)));
  t->secret_ = options.secret;
  t->rail_ = options.rail;
  LOOM_ASSIGN_OR_RETURN(t->fabric_, Fabric::open(options.fabric));
  const ProviderInfo& info = t->fabric_->info();
  t->mrs_ =
      std::make_unique<MrCache>(t->fabric_->domain(), info.mr_local || options.force_registration);
  LOOM_ASSIGN_OR_RETURN(t->listener_, net::listen_on(options.liveness_bind));
  LOOM_ASSIGN_OR_RETURN(t->liveness_address_, net::bound_address(t->listener_.get()));
  LOOM_RETURN_IF_ERROR(t->publish());
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (choose_progress_thread(options.progress_thread, cpus, options.ranks_on_host)) {
    LOOM_ASSIGN_OR_RETURN(t->progress_, OfiProgress::start(*t->fabric_, t->lock_, rank));
  }
  LOOM_LOG_INFO(Net, "rank {}: ofi endpoint{} up: {}{}", rank,
                options.rail > 0 ? fmt::format(" of rail {}", options.rail) : std::string(),
                info.describe(), t->mrs_->enabled() ? " (registering buffers)" : "");
  return t;
}

Status OfiTransport::enable_device_memory(fi_hmem_iface iface, const void* probe, std::size_t bytes,
                                          int device) {
  auto lk = lock_.executor();  // the domain is shared with the progress thread
  HmemDevice kind{iface, static_cast<std::uint64_t>(std::max(device, 0))};
  Status st = mrs_->probe(probe, bytes, kind);
  if (!st.is_ok())
    return st.with_context(
        fmt::format("rank {}: ofi provider {} refused to register device "
                    "memory (iface {})",
                    rank_, fabric_->info().provider, static_cast<int>(iface)));
  device_.iface = iface;
  device_.enabled = true;
  return Status::ok();
}

Status OfiTransport::enable_device_memory(std::string_view runtime, const void* probe,
                                          std::size_t bytes, int device) {
  return enable_device_memory(runtime == "cuda" ? FI_HMEM_CUDA : FI_HMEM_SYSTEM, probe, bytes,
                              device);
}

std::string OfiTransport::key(int rank) const {
  if (rail_ > 0) return fmt::format("loom/{:016x}/ofi/rail{}/{}", comm_id_, rail_, rank);
  return fmt::format("loom/{:016x}/ofi/{}", comm_id_, rank);
}

// Card: [u32 provider length][provider][SocketAddress][endpoint name].
Status OfiTransport::publish() {
  bootstrap::Bytes card;
  const std::string& prov = fabric_->info().provider;
  put(card, static_cast<std::uint32_t>(prov.size()));
  card.insert(card.end(), prov.begin(), prov.end());
  put(card, liveness_address_);
  card.insert(card.end(), fabric_->name().begin(), fabric_->name().end());
  return store_->set(key(rank_), card);
}

Result<OfiTransport::Card> OfiTransport::card_of(int peer, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(bootstrap::Bytes b, store_->get(key(peer), deadline));
  Card c;
  std::uint32_t plen = 0;
  if (b.size() < sizeof plen) return make_error(ErrorCode::Internal, "short ofi card");
  std::memcpy(&plen, b.data(), sizeof plen);
  if (b.size() < sizeof plen + plen + sizeof(net::SocketAddress))
    return make_error(ErrorCode::Internal, "rank {}: short ofi card from rank {}", rank_, peer);
  const auto* p = b.data() + sizeof plen;
  c.provider.assign(reinterpret_cast<const char*>(p), plen);
  std::memcpy(&c.liveness, p + plen, sizeof c.liveness);
  c.name.assign(p + plen + sizeof c.liveness, p + (b.size() - sizeof plen));
  if (c.provider != fabric_->info().provider)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {} uses libfabric provider '{}' but rank {} uses '{}': set the same "
                      "LOOM_OFI_PROVIDER on every rank",
                      rank_, fabric_->info().provider, peer, c.provider);
  return c;
}

Connection* OfiTransport::get(int peer) const {
  return conns_[static_cast<std::size_t>(peer)].get();
}

Status OfiTransport::ensure(const std::vector<int>& peers, Deadline deadline) {
  return connect_in_rank_order(
      rank_, peers, deadline, [this](int p) { return get(p) != nullptr; },
      [this](int p, Deadline d) { return connect_to(p, d); },
      [this](int p, Deadline d) { return accept_from(p, d); });
}

Status OfiTransport::connect_to(int peer, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(Card card, card_of(peer, deadline));
  const std::string what = fmt::format("rank {}: ofi liveness connection to rank {} at {}", rank_,
                                       peer, card.liveness.to_string());
  auto fd = net::connect_with_retry(card.liveness, deadline);
  if (!fd.is_ok()) return fd.status().with_context(what);
  Hello h;
  h.from_rank = rank_;
  h.comm_id = comm_id_;
  h.to_rank = peer;
  crypto::Nonce nonce{};
  LOOM_RETURN_IF_ERROR(net::recv_all(fd->get(), nonce.data(), nonce.size(), deadline, what));
  std::array<std::uint8_t, sizeof(Hello) + sizeof(crypto::Mac)> msg{};
  std::memcpy(msg.data(), &h, sizeof h);
  crypto::Mac mac = crypto::prove(secret_, kLivenessDomain, nonce,
                                  std::span<const std::uint8_t>(msg.data(), sizeof h));
  std::memcpy(msg.data() + sizeof h, mac.data(), mac.size());
  LOOM_RETURN_IF_ERROR(net::send_all(fd->get(), msg.data(), msg.size(), deadline, what));
  std::uint8_t ack = 0;
  Status st = net::recv_all(fd->get(), &ack, 1, deadline, what);
  if (!st.is_ok() || ack != kAccepted)
    return make_error(ErrorCode::PeerFailed,
                      "{}: rank {} rejected the connection (a different job secret or "
                      "communicator?): {}",
                      what, peer, st.is_ok() ? "bad confirmation" : st.message());
  return add_connection(peer, card, std::move(fd).value());
}

Status OfiTransport::accept_from(int peer, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(Card card, card_of(peer, deadline));
  while (accepted_.find(peer) == accepted_.end()) {
    Status st = accept_one(deadline);
    if (!st.is_ok())
      return st.with_context(
          fmt::format("rank {}: waiting for rank {}'s ofi liveness connection", rank_, peer));
  }
  net::Fd fd = std::move(accepted_[peer]);
  accepted_.erase(peer);
  return add_connection(peer, card, std::move(fd));
}

// Accepts one liveness connection and files it under its peer once its proof checks out;
// connections that fail authentication or carry a foreign hello are dropped with a WARN.
Status OfiTransport::accept_one(Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(net::Fd fd, net::accept_until(listener_.get(), deadline));
  Deadline hello_deadline = deadline.earliest(Deadline::after(std::chrono::seconds(10)));
  const crypto::Nonce nonce = crypto::make_nonce();
  std::array<std::uint8_t, sizeof(Hello) + sizeof(crypto::Mac)> msg{};
  Status st =
      net::send_all(fd.get(), nonce.data(), nonce.size(), hello_deadline, "ofi liveness challenge");
  if (st.is_ok())
    st = net::recv_all(fd.get(), msg.data(), msg.size(), hello_deadline, "ofi liveness hello");
  if (!st.is_ok()) {
    LOOM_LOG_WARN(Net, "rank {}: dropped an ofi liveness connection: {}", rank_, st.message());
    return Status::ok();
  }
  crypto::Mac got{};
  std::memcpy(got.data(), msg.data() + sizeof(Hello), got.size());
  if (!crypto::mac_equal(got,
                         crypto::prove(secret_, kLivenessDomain, nonce,
                                       std::span<const std::uint8_t>(msg.data(), sizeof(Hello))))) {
    LOOM_LOG_WARN(Net,
                  "rank {}: dropped an ofi liveness connection that failed authentication (wrong "
                  "job secret)",
                  rank_);
    return Status::ok();
  }
  Hello h;
  std::memcpy(&h, msg.data(), sizeof h);
  if (h.magic != kLivenessMagic || h.comm_id != comm_id_ || h.to_rank != rank_ || h.from_rank < 0 ||
      h.from_rank >= rank_) {
    LOOM_LOG_WARN(Net, "rank {}: dropped an ofi liveness connection with an invalid hello", rank_);
    return Status::ok();
  }
  std::uint8_t ack = kAccepted;
  if (Status sent = net::send_all(fd.get(), &ack, 1, hello_deadline, "ofi liveness confirmation");
      !sent.is_ok()) {
    LOOM_LOG_WARN(Net, "rank {}: dropped an ofi liveness connection: {}", rank_, sent.message());
    return Status::ok();
  }
  accepted_[h.from_rank] = std::move(fd);
  return Status::ok();
}

Status OfiTransport::add_connection(int peer, const Card& card, net::Fd liveness) {
  LOOM_RETURN_IF_ERROR(net::set_nonblocking(liveness.get(), true));
  std::unique_lock<std::mutex> lk;
  if (progress_) lk = lock_.executor();  // the thread may be reading the completion queue
  LOOM_ASSIGN_OR_RETURN(fi_addr_t addr, fabric_->insert(card.name));
  LOOM_LOG_INFO(Net, "rank {}: connected to rank {} over ofi ({})", rank_, peer,
                fabric_->info().describe());
  conns_[static_cast<std::size_t>(peer)] =
      std::make_unique<OfiConnection>(rank_, peer, comm_id_, *fabric_, *mrs_, addr,
                                      std::move(liveness), device_, progress_.get(), &lock_);
  return Status::ok();
}

}  // namespace loom::transport::ofi
