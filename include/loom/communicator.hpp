// The communicator: a group of ranks that run collectives together.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/error.hpp"
#include "loom/options.hpp"
#include "loom/types.hpp"
#include "loom/unique_id.hpp"
#include "loom/work.hpp"

namespace loom {

class Communicator;
namespace detail {
class CommImpl;
Communicator wrap_communicator(std::unique_ptr<CommImpl> impl);
}  // namespace detail

/// A group of `size()` ranks. Every collective is called by all ranks in the same order with
/// matching arguments; each call returns a Work handle at once (`.wait()` makes it blocking).
///
/// Buffers: `send` and `recv` may be the same pointer for an in-place call (allgather: `send` ==
/// `recv + rank * count`; reduce_scatter: `recv` == `send + rank * recvcount`); buffers that
/// overlap in any other way are refused (InvalidArgument). Buffers must stay
/// valid until the Work completes. Calls on one communicator must come from one thread at a time.
class Communicator {
 public:
  /// Joins the job named by `id` as `rank` of `nranks`. Blocks until all ranks have joined or the
  /// timeout passes.
  Communicator(const UniqueId& id, int rank, int nranks, const CommOptions& options = {});
  /// Joins the job described by the environment a launcher set: loom's own LOOM_RANK,
  /// LOOM_WORLD_SIZE, LOOM_ROOT (host:port), or torchrun's RANK, WORLD_SIZE, MASTER_ADDR,
  /// MASTER_PORT, or Slurm srun's SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST (root: its
  /// first host; port: LOOM_PORT or derived from the job and step ids), or Open MPI mpirun's
  /// OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE with LOOM_ROOT, in that order of precedence
  /// (OMPI_* win over the SLURM_* of an enclosing allocation).
  static Communicator from_env(const CommOptions& options = {});

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  /// Completes outstanding operations (bounded by the timeout) and releases every resource.
  ~Communicator();

  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;

  Work allreduce(const void* send, void* recv, std::size_t count, DataType dtype, RedOp op,
                 const CollOptions& opts = {});
  /// `recv` holds size() * `count` elements; rank r's `send` lands at `recv + r * count`.
  Work allgather(const void* send, void* recv, std::size_t count, DataType dtype,
                 const CollOptions& opts = {});
  /// On `root`, `send` is broadcast; every rank receives into `recv`.
  Work broadcast(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                 const CollOptions& opts = {});
  /// The reduction lands in `recv` on `root` only (`recv` may be null elsewhere).
  Work reduce(const void* send, void* recv, std::size_t count, DataType dtype, RedOp op, int root,
              const CollOptions& opts = {});
  /// `send` holds size() * `recvcount` elements; rank r receives the reduction of block r.
  Work reduce_scatter(const void* send, void* recv, std::size_t recvcount, DataType dtype, RedOp op,
                      const CollOptions& opts = {});
  Work barrier(const CollOptions& opts = {});

  // Data movement without reduction (docs/collectives.md).

  /// `send` and `recv` hold size() blocks of `count` elements: block p of `send` goes to rank
  /// p, block p of `recv` comes from rank p. In place when `send` == `recv`.
  Work alltoall(const void* send, void* recv, std::size_t count, DataType dtype,
                const CollOptions& opts = {});
  /// All-to-all with a block size per pair, in elements: `send_counts[p]` elements at
  /// `send + send_displs[p]` go to rank p, `recv_counts[p]` elements from rank p land at
  /// `recv + recv_displs[p]` (size() entries each; rank p's send_counts[r] must equal rank r's
  /// recv_counts[p], or the call fails with Mismatch naming both). In place when `send` ==
  /// `recv`, with the same counts and displacements both ways.
  Work alltoallv(const void* send, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* recv,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                 DataType dtype, const CollOptions& opts = {});
  /// alltoallv with the blocks packed in rank order (displacements are the running sums of the
  /// counts), as torch's all_to_all_single with split sizes.
  Work alltoallv(const void* send, std::span<const std::size_t> send_counts, void* recv,
                 std::span<const std::size_t> recv_counts, DataType dtype,
                 const CollOptions& opts = {});
  /// Every rank's `count` elements land on `root` at `recv + rank * count` (`recv` may be null
  /// elsewhere). In place on the root when `send` == `recv + root * count`.
  Work gather(const void* send, void* recv, std::size_t count, DataType dtype, int root,
              const CollOptions& opts = {});
  /// Block r of the root's `send` (size() blocks of `count` elements) lands in rank r's `recv`
  /// (`send` may be null elsewhere). In place on the root when `recv` == `send + root * count`.
  Work scatter(const void* send, void* recv, std::size_t count, DataType dtype, int root,
               const CollOptions& opts = {});

  // Typed forms over std::span. The in-place forms take one span.
  template <typename T>
  Work allreduce(std::span<const T> send, std::span<T> recv, RedOp op,
                 const CollOptions& opts = {}) {
    check_span_sizes(send.size(), recv.size(), 1, "allreduce");
    return allreduce(send.data(), recv.data(), send.size(), dtype_of_v<T>, op, opts);
  }
  template <typename T>
  Work allreduce(std::span<T> inout, RedOp op, const CollOptions& opts = {}) {
    return allreduce(inout.data(), inout.data(), inout.size(), dtype_of_v<T>, op, opts);
  }
  template <typename T>
  Work allgather(std::span<const T> send, std::span<T> recv, const CollOptions& opts = {}) {
    check_span_sizes(send.size(), recv.size(), size(), "allgather");
    return allgather(send.data(), recv.data(), send.size(), dtype_of_v<T>, opts);
  }
  template <typename T>
  Work broadcast(std::span<T> inout, int root, const CollOptions& opts = {}) {
    return broadcast(inout.data(), inout.data(), inout.size(), dtype_of_v<T>, root, opts);
  }
  template <typename T>
  Work reduce(std::span<T> inout, RedOp op, int root, const CollOptions& opts = {}) {
    return reduce(inout.data(), inout.data(), inout.size(), dtype_of_v<T>, op, root, opts);
  }
  template <typename T>
  Work reduce_scatter(std::span<const T> send, std::span<T> recv, RedOp op,
                      const CollOptions& opts = {}) {
    check_span_sizes(recv.size(), send.size(), size(), "reduce_scatter");
    return reduce_scatter(send.data(), recv.data(), recv.size(), dtype_of_v<T>, op, opts);
  }

  // Grouped calls (docs/collectives.md), as NCCL's ncclGroupStart/End: the calls made between
  // the outermost group_start() and group_end() are checked at once and run when the group
  // ends, together: the collectives first, in call order, allreduces of one data type and op
  // fused into one; then every send and receive side by side (so two ranks that both send
  // before they receive do not wait for each other). Each call's Work completes with the
  // operation that carries it and may only be waited for after group_end(). Groups nest.
  void group_start();
  void group_end();

  // Point-to-point (docs/collectives.md). Not collective: only the two ranks call. Between a
  // pair, the n-th send from a to b matches b's n-th receive from a, which must name the same
  // `tag` and count (or both fail with Mismatch naming both ranks), whatever other pairs do.
  // Sends, receives and collectives run in the order they are called on a rank, so a pair must
  // call its sends, receives and collectives in a matching order (as with NCCL); sendrecv()
  // sends and receives at once (two ranks that exchange must use it, or post the receive
  // first, since a large send waits for its receiver).

  /// Sends `count` elements to rank `peer`.
  Work send(const void* buf, std::size_t count, DataType dtype, int peer, int tag = 0,
            const CollOptions& opts = {});
  /// Receives exactly `count` elements from rank `peer`.
  Work recv(void* buf, std::size_t count, DataType dtype, int peer, int tag = 0,
            const CollOptions& opts = {});
  /// Receives exactly `count` elements from whichever rank first sends this rank a message with
  /// `tag` (MPI_ANY_SOURCE); `*source` (if not null) holds its rank once the Work completes.
  /// Each rank's messages are still taken in the order it sent them. It connects to every other
  /// rank first (a rank takes part when it next talks to this one, as its send does), and needs
  /// transports that can look at a message before receiving it (shm and tcp; not ofi or
  /// cuda_ipc: InvalidUsage). Host memory only; not inside a group.
  Work recv_any(void* buf, std::size_t count, DataType dtype, int* source, int tag = 0,
                const CollOptions& opts = {});
  /// Sends `sendcount` elements to `to` and receives `recvcount` from `from` at the same time
  /// (MPI_Sendrecv; the buffers must not overlap). Either peer may be -1 (none).
  Work sendrecv(const void* send, std::size_t sendcount, int to, void* recv, std::size_t recvcount,
                int from, DataType dtype, int tag = 0, const CollOptions& opts = {});

  template <typename T>
  Work send(std::span<const T> buf, int peer, int tag = 0, const CollOptions& opts = {}) {
    return send(buf.data(), buf.size(), dtype_of_v<T>, peer, tag, opts);
  }
  template <typename T>
  Work recv(std::span<T> buf, int peer, int tag = 0, const CollOptions& opts = {}) {
    return recv(buf.data(), buf.size(), dtype_of_v<T>, peer, tag, opts);
  }
  template <typename T>
  Work recv_any(std::span<T> buf, int* source, int tag = 0, const CollOptions& opts = {}) {
    return recv_any(buf.data(), buf.size(), dtype_of_v<T>, source, tag, opts);
  }

  template <typename T>
  Work alltoall(std::span<const T> send, std::span<T> recv, const CollOptions& opts = {}) {
    check_span_sizes(send.size(), recv.size(), 1, "alltoall");
    return alltoall(send.data(), recv.data(), block_of(send.size(), "alltoall"), dtype_of_v<T>,
                    opts);
  }
  template <typename T>
  Work alltoall(std::span<T> inout, const CollOptions& opts = {}) {
    return alltoall(inout.data(), inout.data(), block_of(inout.size(), "alltoall"), dtype_of_v<T>,
                    opts);
  }
  template <typename T>
  Work alltoallv(std::span<const T> send, std::span<const std::size_t> send_counts,
                 std::span<T> recv, std::span<const std::size_t> recv_counts,
                 const CollOptions& opts = {}) {
    check_packed(send.size(), send_counts, "alltoallv send");
    check_packed(recv.size(), recv_counts, "alltoallv receive");
    return alltoallv(send.data(), send_counts, recv.data(), recv_counts, dtype_of_v<T>, opts);
  }
  /// `recv` is used on the root only (size() x send.size() elements; empty elsewhere).
  template <typename T>
  Work gather(std::span<const T> send, std::span<T> recv, int root, const CollOptions& opts = {}) {
    if (rank() == root) check_span_sizes(send.size(), recv.size(), size(), "gather");
    return gather(send.data(), recv.data(), send.size(), dtype_of_v<T>, root, opts);
  }
  /// `send` is used on the root only (size() x recv.size() elements; empty elsewhere).
  template <typename T>
  Work scatter(std::span<const T> send, std::span<T> recv, int root, const CollOptions& opts = {}) {
    if (rank() == root) check_span_sizes(recv.size(), send.size(), size(), "scatter");
    return scatter(send.data(), recv.data(), recv.size(), dtype_of_v<T>, root, opts);
  }

  // Reliability (docs/reliability.md). abort(), async_error(), failed_ranks() and status() are
  // safe to call from any thread, also while another thread issues or waits for calls.

  /// Fails every pending operation with ErrorCode::Aborted and releases the communicator's
  /// threads, sockets and shared memory; returns within 1 s even with operations in flight.
  /// Safe to call from another thread than the one issuing collectives. Later calls fail with
  /// Aborted; the object must still be destroyed (or moved from).
  void abort();
  /// The first failure of this communicator (one of its operations', or a peer's reported out
  /// of band), without blocking; nullopt while it is healthy.
  [[nodiscard]] std::optional<Error> async_error() const;
  /// Ranks known to have failed (detected here or reported by another rank), ascending.
  [[nodiscard]] std::vector<int> failed_ranks() const;
  /// One line for humans: last submitted and completed operation, the oldest unfinished one
  /// and the oldest unfinished send or receive, failure, failed ranks and the last timeout
  /// report (which names the ranks that lagged behind).
  [[nodiscard]] std::string status() const;
  /// This rank's flight record as a JSON document: its last LOOM_FLIGHT_RECORDER collective
  /// calls (number, call, algorithm, state, and when each was submitted, started and
  /// completed) and as many sends and receives (peers, message numbers, state, times), with
  /// status(). With LOOM_FLIGHT_DIR set, every rank also writes it to a file
  /// when a call fails, on SIGUSR1 (LOOM_STATUS_SIGNAL=1) and when the communicator goes;
  /// `loom-trace` merges a job's files (docs/reliability.md, "Flight recorder").
  [[nodiscard]] std::string flight_record() const;
  /// Collective over every rank: ranks passing the same `color` form a new communicator,
  /// ranked by (`key`, old rank). A negative color joins none (returns an empty communicator).
  Communicator split(int color, int key);
  /// Collective over the ranks not in `excluded`: a new communicator of the others (ranked in
  /// their old order), built without restarting processes; works after a failure. The
  /// rendezvous store must survive: the process hosting it (rank 0 under loomrun) must not be
  /// excluded.
  Communicator shrink(const std::vector<int>& excluded);
  /// False for an empty communicator (moved from, or from split with a negative color).
  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }

 private:
  friend Communicator detail::wrap_communicator(std::unique_ptr<detail::CommImpl> impl);
  explicit Communicator(std::unique_ptr<detail::CommImpl> impl);
  void check_span_sizes(std::size_t small, std::size_t large, std::size_t factor,
                        const char* what) const;
  /// `elements` / size(), refusing a size that does not divide.
  [[nodiscard]] std::size_t block_of(std::size_t elements, const char* what) const;
  /// Refuses counts that do not add up to `elements`.
  void check_packed(std::size_t elements, std::span<const std::size_t> counts,
                    const char* what) const;
  detail::CommImpl& impl() const;

  std::unique_ptr<detail::CommImpl> impl_;
};

/// RAII group: group_start() on construction, group_end() at end() or destruction (where an
/// error is logged, not thrown: call end() to see it).
class Group {
 public:
  explicit Group(Communicator& comm) : comm_(&comm) { comm.group_start(); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group();
  /// Ends the group: runs its calls (throws loom::Error if they cannot start).
  void end();

 private:
  Communicator* comm_;
};

}  // namespace loom
