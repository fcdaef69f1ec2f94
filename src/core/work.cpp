#include "loom/work.hpp"

#include <fmt/format.h>

#include "executor/engine.hpp"

namespace loom {
namespace {

// The state that carries the call: a grouped call's forwards to its group's operation.
detail::OpState& resolve(const std::shared_ptr<detail::OpState>& state, const char* what) {
  if (!state) throw Error(ErrorCode::InvalidUsage, fmt::format("{} on an empty handle", what));
  detail::OpState* s = state.get();
  while (s->grouped) {
    if (!s->forward)
      throw Error(ErrorCode::InvalidUsage,
                  fmt::format("{}: {}: the call is inside a group that has not ended (call "
                              "group_end() first)",
                              what, s->grouped_call ? s->grouped_call() : "a grouped call"));
    s = s->forward.get();
  }
  return *s;
}

}  // namespace

void Work::wait(std::optional<std::chrono::milliseconds> timeout) const {
  detail::OpState& state = resolve(state_, "Work::wait");
  auto engine = state.engine.lock();
  if (!engine) {
    // Completed before submission (e.g. a zero-count call) or the communicator is gone.
    if (!state.done)
      throw Error(ErrorCode::InvalidUsage, "Work::wait: the communicator was destroyed");
    throw_if_error(state.status);
    return;
  }
  Deadline until = timeout ? Deadline::after(*timeout) : Deadline::never();
  throw_if_error(engine->wait(state, until));
}

bool Work::test() const {
  detail::OpState& state = resolve(state_, "Work::test");
  auto engine = state.engine.lock();
  if (!engine) {
    if (!state.done)
      throw Error(ErrorCode::InvalidUsage, "Work::test: the communicator was destroyed");
    throw_if_error(state.status);
    return true;
  }
  auto r = engine->test(state);
  if (!r.is_ok()) throw_if_error(r.status());
  return *r;
}

}  // namespace loom
