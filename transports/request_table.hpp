// Fixed-size table of a connection's outstanding requests, shared by the transports. Ids are
// handed out in order and index the table modulo its size; a slot is free while its id is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.hpp"
#include "transports/connection.hpp"

namespace loom::transport {

template <typename Op, std::size_t N = 1024>
class RequestTable {
 public:
  RequestTable() : ops_(N) {}

  /// A fresh, value-initialised Op with a new id; Internal error (naming `who`) when N requests
  /// are already outstanding. `who` is a string, or a callable returning one that is called only
  /// on error (keeps string formatting off the hot path).
  template <typename Who>
  Result<Op*> allocate(const Who& who) {
    Op& op = ops_[next_id_ % N];
    if (op.id != 0)
      return make_error(ErrorCode::Internal, "{}: more than {} requests outstanding", name(who), N);
    op = Op{};
    op.id = next_id_++;
    return &op;
  }
  /// The Op behind `request`; Internal error when it is unknown or already completed.
  template <typename Who>
  Result<Op*> find(const Request& request, const Who& who) {
    Op& op = ops_[request.id % N];
    if (op.id != request.id || request.id == 0)
      return make_error(ErrorCode::Internal, "{}: unknown request {}", name(who), request.id);
    return &op;
  }
  /// Frees the slot of a completed request.
  static void release(Op& op) { op.id = 0; }

 private:
  template <typename Who>
  static std::string name(const Who& who) {
    if constexpr (std::is_invocable_v<const Who&>)
      return who();
    else
      return std::string(who);
  }

  std::vector<Op> ops_;
  std::uint64_t next_id_ = 1;
};

}  // namespace loom::transport
