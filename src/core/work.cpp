#include "loom/work.hpp"

#include "executor/engine.hpp"

namespace loom {

void Work::wait(std::optional<std::chrono::milliseconds> timeout) const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::wait on an empty handle");
  auto engine = state_->engine.lock();
  if (!engine) {
    // Completed before submission (e.g. a zero-count call) or the communicator is gone.
    if (!state_->done)
      throw Error(ErrorCode::InvalidUsage, "Work::wait: the communicator was destroyed");
    throw_if_error(state_->status);
    return;
  }
  Deadline until = timeout ? Deadline::after(*timeout) : Deadline::never();
  throw_if_error(engine->wait(*state_, until));
}

bool Work::test() const {
  if (!state_) throw Error(ErrorCode::InvalidUsage, "Work::test on an empty handle");
  auto engine = state_->engine.lock();
  if (!engine) {
    if (!state_->done)
      throw Error(ErrorCode::InvalidUsage, "Work::test: the communicator was destroyed");
    throw_if_error(state_->status);
    return true;
  }
  auto r = engine->test(*state_);
  if (!r.is_ok()) throw_if_error(r.status());
  return *r;
}

}  // namespace loom
