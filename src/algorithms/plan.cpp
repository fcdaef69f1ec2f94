#include "algorithms/plan.hpp"

#include <algorithm>

namespace loom::algo {

std::uint32_t Plan::add(Step step, std::initializer_list<std::uint32_t> step_deps) {
  step.dep_begin = static_cast<std::uint32_t>(deps.size());
  step.dep_count = 0;
  for (std::uint32_t d : step_deps) {
    if (d == kNoStep) continue;
    deps.push_back(d);
    ++step.dep_count;
  }
  steps.push_back(step);
  return static_cast<std::uint32_t>(steps.size() - 1);
}

std::vector<int> Plan::peers() const {
  std::vector<int> out;
  for (const Step& s : steps)
    if ((s.kind == StepKind::Send || s.kind == StepKind::Recv) &&
        std::find(out.begin(), out.end(), s.peer) == out.end())
      out.push_back(s.peer);
  return out;
}

Block split_block(std::size_t count, std::size_t parts, std::size_t i) {
  std::size_t base = count / parts;
  std::size_t extra = count % parts;
  std::size_t first = i * base + std::min(i, extra);
  return {first, base + (i < extra ? 1 : 0)};
}

SlotPool::SlotPool(std::size_t slot_bytes, std::size_t nslots, std::size_t base_offset)
    : slot_bytes_(slot_bytes),
      base_(base_offset),
      free_after_(std::max<std::size_t>(nslots, 1), kNoStep) {}

SlotPool::Slot SlotPool::acquire() {
  std::size_t i = next_;
  next_ = (next_ + 1) % free_after_.size();
  return take(i);
}

SlotPool::Slot SlotPool::take(std::size_t i) {
  return {i, Span{BufId::Scratch, base_ + i * slot_bytes_, slot_bytes_}, free_after_[i]};
}

void SlotPool::release(std::size_t index, std::uint32_t step) {
  free_after_[index] = step;
}

}  // namespace loom::algo
