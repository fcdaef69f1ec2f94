// The public Communicator: argument packing and error conversion around CommImpl.
#include "loom/communicator.hpp"

#include "core/comm_impl.hpp"
#include "core/comm_setup.hpp"
#include "launch/job_secret.hpp"
#include "launch/launch_env.hpp"
#include "log/log.hpp"

namespace loom {

namespace detail {
Communicator wrap_communicator(std::unique_ptr<CommImpl> impl) {
  return Communicator(std::move(impl));
}
}  // namespace detail

namespace {

config::Config load_config(const CommOptions& options) {
  auto settings = options.settings;
  if (options.timeout)
    throw_if_error(config::check_timeout("CommOptions::timeout", *options.timeout));
  if (options.timeout) settings["LOOM_TIMEOUT"] = fmt::format("{}ms", options.timeout->count());
  if (options.deterministic)
    settings.insert_or_assign("LOOM_DETERMINISTIC",
                              std::string(1, *options.deterministic ? '1' : '0'));
  return value_or_throw(config::Config::load(settings));
}

// send() and recv() name one peer: -1 (sendrecv's "none") is as out of range as any other.
void check_one_peer(const Communicator& comm, const char* what, int peer, std::size_t count,
                    DataType dtype, int tag) {
  if (peer >= 0) return;
  throw Error(
      ErrorCode::InvalidArgument,
      fmt::format("rank {}: {} rank {} ({} x {}, tag {}): peer {} is out of range [0, {}){}",
                  comm.rank(), what, peer, count, to_string(dtype), tag, peer, comm.size(),
                  what[0] == 'r' ? " (recv_any receives from any source)" : ""));
}

}  // namespace

Communicator::Communicator(const UniqueId& id, int rank, int nranks, const CommOptions& options)
    : impl_(value_or_throw(detail::join(id, rank, nranks, load_config(options)))) {}

Communicator Communicator::from_env(const CommOptions& options) {
  config::Config cfg = load_config(options);
  launch::LaunchInfo li = value_or_throw(launch::detect_launch(cfg));
  throw_if_error(log::configure(cfg));
  LOOM_LOG_INFO(Init, "rank {} of {}: launch environment from {} ({})", li.rank, li.world_size,
                li.source,
                !li.detail.empty()  ? li.detail
                : li.id_hex.empty() ? "root " + li.root
                                    : "LOOM_ID");
  UniqueId id = li.id_hex.empty() ? UniqueId::for_root(
                                        li.root, value_or_throw(launch::job_secret(cfg, li.source)))
                                  : UniqueId::from_string(li.id_hex);
  return Communicator(value_or_throw(detail::join(id, li.rank, li.world_size, std::move(cfg))));
}

Communicator::Communicator(std::unique_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

detail::CommImpl& Communicator::impl() const {
  if (!impl_)
    throw Error(ErrorCode::InvalidUsage, "call on a moved-from or destroyed communicator");
  return *impl_;
}

int Communicator::rank() const {
  return impl().rank();
}
int Communicator::size() const {
  return impl().size();
}

void Communicator::check_span_sizes(std::size_t small, std::size_t large, std::size_t factor,
                                    const char* what) const {
  if (small * factor != large)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: {}: span sizes {} and {} do not match (expected {} x {})",
                            rank(), what, small, large, factor, small));
}

std::size_t Communicator::block_of(std::size_t elements, const char* what) const {
  const auto n = static_cast<std::size_t>(size());
  if (elements % n != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: {}: span size {} is not a multiple of the {} ranks", rank(),
                            what, elements, n));
  return elements / n;
}

void Communicator::check_packed(std::size_t elements, std::span<const std::size_t> counts,
                                const char* what) const {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  if (total != elements)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: {}: the counts add up to {} elements, the span holds {}",
                            rank(), what, total, elements));
}

namespace {
coll::OpDesc desc(coll::CollKind kind, const void* send, void* recv, std::size_t count,
                  DataType dtype, RedOp op, int root) {
  coll::OpDesc d;
  d.kind = kind;
  d.send = send;
  d.recv = recv;
  d.count = count;
  d.dtype = dtype;
  d.redop = op;
  d.root = root;
  return d;
}
}  // namespace

Work Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                             RedOp op, const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::AllReduce, send, recv, count, dtype, op, -1), opts);
}

Work Communicator::allgather(const void* send, void* recv, std::size_t count, DataType dtype,
                             const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::AllGather, send, recv, count, dtype, RedOp::Sum, -1),
                       opts);
}

Work Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType dtype,
                             int root, const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::Broadcast, send, recv, count, dtype, RedOp::Sum, root),
                       opts);
}

Work Communicator::reduce(const void* send, void* recv, std::size_t count, DataType dtype, RedOp op,
                          int root, const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::Reduce, send, recv, count, dtype, op, root), opts);
}

Work Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                  DataType dtype, RedOp op, const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::ReduceScatter, send, recv, recvcount, dtype, op, -1),
                       opts);
}

Work Communicator::alltoall(const void* send, void* recv, std::size_t count, DataType dtype,
                            const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::AllToAll, send, recv, count, dtype, RedOp::Sum, -1),
                       opts);
}

Work Communicator::alltoallv(const void* send, std::span<const std::size_t> send_counts,
                             std::span<const std::size_t> send_displs, void* recv,
                             std::span<const std::size_t> recv_counts,
                             std::span<const std::size_t> recv_displs, DataType dtype,
                             const CollOptions& opts) {
  coll::OpDesc d = desc(coll::CollKind::AllToAllV, send, recv, 0, dtype, RedOp::Sum, -1);
  auto v = std::make_shared<coll::VLayout>();
  v->send_counts.assign(send_counts.begin(), send_counts.end());
  v->send_displs.assign(send_displs.begin(), send_displs.end());
  v->recv_counts.assign(recv_counts.begin(), recv_counts.end());
  v->recv_displs.assign(recv_displs.begin(), recv_displs.end());
  d.v = std::move(v);
  return impl().submit(std::move(d), opts);
}

Work Communicator::alltoallv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                             std::span<const std::size_t> recv_counts, DataType dtype,
                             const CollOptions& opts) {
  auto packed = [](std::span<const std::size_t> counts) {
    std::vector<std::size_t> displs(counts.size());
    std::size_t at = 0;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      displs[p] = at;
      at += counts[p];
    }
    return displs;
  };
  const std::vector<std::size_t> sd = packed(send_counts), rd = packed(recv_counts);
  return alltoallv(send, send_counts, sd, recv, recv_counts, rd, dtype, opts);
}

Work Communicator::gather(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                          const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::Gather, send, recv, count, dtype, RedOp::Sum, root),
                       opts);
}

Work Communicator::scatter(const void* send, void* recv, std::size_t count, DataType dtype,
                           int root, const CollOptions& opts) {
  return impl().submit(desc(coll::CollKind::Scatter, send, recv, count, dtype, RedOp::Sum, root),
                       opts);
}

Work Communicator::send(const void* buf, std::size_t count, DataType dtype, int peer, int tag,
                        const CollOptions& opts) {
  check_one_peer(*this, "send to", peer, count, dtype, tag);
  return sendrecv(buf, count, peer, nullptr, 0, -1, dtype, tag, opts);
}

Work Communicator::recv(void* buf, std::size_t count, DataType dtype, int peer, int tag,
                        const CollOptions& opts) {
  check_one_peer(*this, "recv from", peer, count, dtype, tag);
  return sendrecv(nullptr, 0, -1, buf, count, peer, dtype, tag, opts);
}

Work Communicator::recv_any(void* buf, std::size_t count, DataType dtype, int* source, int tag,
                            const CollOptions& opts) {
  coll::OpDesc d = desc(coll::CollKind::P2P, nullptr, buf, 0, dtype, RedOp::Sum, -1);
  d.p2p.any_source = true;
  d.p2p.recv_count = count;
  d.p2p.tag = tag;
  return impl().receive_any(std::move(d), source, opts);
}

Work Communicator::sendrecv(const void* send, std::size_t sendcount, int to, void* recv,
                            std::size_t recvcount, int from, DataType dtype, int tag,
                            const CollOptions& opts) {
  coll::OpDesc d = desc(coll::CollKind::P2P, send, recv, sendcount, dtype, RedOp::Sum, -1);
  d.p2p.to = to;
  d.p2p.from = from;
  d.p2p.recv_count = recvcount;
  d.p2p.tag = tag;
  return impl().submit(std::move(d), opts);
}

void Communicator::group_start() {
  impl().group_start();
}

void Communicator::group_end() {
  impl().group_end();
}

void Group::end() {
  Communicator* c = std::exchange(comm_, nullptr);
  if (c != nullptr) c->group_end();
}

Group::~Group() {
  try {
    end();
  } catch (const Error& e) {
    LOOM_LOG_ERROR(Coll, "a group ended by its destructor failed: {}", e.what());
  }
}

Work Communicator::barrier(const CollOptions& opts) {
  return impl().submit(
      desc(coll::CollKind::Barrier, nullptr, nullptr, 0, DataType::Uint8, RedOp::Sum, -1), opts);
}

void Communicator::abort() {
  impl().abort();
}

std::optional<Error> Communicator::async_error() const {
  Status st = impl().async_error();
  if (st.is_ok()) return std::nullopt;
  return Error(st.code(), st.message());
}

std::vector<int> Communicator::failed_ranks() const {
  return impl().failed_ranks();
}

std::string Communicator::status() const {
  return impl().status();
}

std::string Communicator::flight_record() const {
  return impl().flight_record("asked", impl().status());
}

Communicator Communicator::split(int color, int key) {
  return Communicator(value_or_throw(impl().split(color, key)));
}

Communicator Communicator::shrink(const std::vector<int>& excluded) {
  return Communicator(value_or_throw(impl().shrink(excluded)));
}

}  // namespace loom
