#include "loom/memory.hpp"

#include "common/shared_buffers.hpp"
#include "common/status.hpp"

namespace loom {

void* host_alloc(std::size_t bytes) {
  return value_or_throw(shared_buffers::allocate(bytes));
}

void host_free(void* p) {
  if (p == nullptr) return;
  if (!shared_buffers::release(p))
    throw Error(ErrorCode::InvalidArgument,
                "host_free: the pointer was not returned by loom::host_alloc");
}

}  // namespace loom
