#include "bootstrap/memory_store.hpp"

namespace loom::bootstrap {

Status InMemoryStore::set(const std::string& key, std::span<const std::uint8_t> value) {
  {
    std::lock_guard lock(mu_);
    data_[key].assign(value.begin(), value.end());
  }
  cv_.notify_all();
  return Status::ok();
}

Result<Bytes> InMemoryStore::get(const std::string& key, Deadline deadline) {
  std::unique_lock lock(mu_);
  auto present = [&] { return data_.find(key) != data_.end(); };
  if (deadline.at() == Clock::time_point::max()) {
    cv_.wait(lock, present);
  } else if (!cv_.wait_until(lock, deadline.at(), present)) {
    return make_error(ErrorCode::Timeout, "store get '{}': timed out waiting for the key", key);
  }
  return data_.find(key)->second;
}

Result<std::int64_t> InMemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t value = 0;
  {
    std::lock_guard lock(mu_);
    auto it = data_.find(key);
    LOOM_ASSIGN_OR_RETURN(value,
                          counter_add(it == data_.end() ? nullptr : &it->second, delta, key));
    data_[key] = format_counter(value);
  }
  cv_.notify_all();
  return value;
}

Result<std::int64_t> InMemoryStore::erase_prefix(const std::string& prefix) {
  std::lock_guard lock(mu_);
  std::int64_t n = 0;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.starts_with(prefix);) {
    it = data_.erase(it);
    ++n;
  }
  return n;
}

std::size_t InMemoryStore::size() {
  std::lock_guard lock(mu_);
  return data_.size();
}

}  // namespace loom::bootstrap
