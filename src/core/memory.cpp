#include "loom/memory.hpp"

#include "common/shared_buffers.hpp"
#include "common/status.hpp"
#include "log/log.hpp"

namespace loom {

void* host_alloc(std::size_t bytes) {
  return value_or_throw(shared_buffers::allocate(bytes));
}

void host_free(void* p) {
  if (p == nullptr) return;
  switch (shared_buffers::release(p)) {
    case shared_buffers::Released::Now: return;
    case shared_buffers::Released::Deferred:
      LOOM_LOG_WARN(Init,
                    "host_free({}) while an operation still uses the buffer: it is freed when "
                    "the last such operation completes (wait for their Work before freeing)",
                    p);
      return;
    case shared_buffers::Released::Unknown: break;
  }
  throw Error(ErrorCode::InvalidArgument,
              "host_free: the pointer was not returned by loom::host_alloc (or freed already)");
}

}  // namespace loom
