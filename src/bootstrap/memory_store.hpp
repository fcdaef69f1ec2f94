// In-process store: threads-as-ranks tests share one instance.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "bootstrap/store.hpp"

namespace loom::bootstrap {

class InMemoryStore final : public Store {
 public:
  Status set(const std::string& key, std::span<const std::uint8_t> value) override;
  Result<Bytes> get(const std::string& key, Deadline deadline) override;
  Result<std::int64_t> add(const std::string& key, std::int64_t delta) override;
  Result<std::int64_t> erase_prefix(const std::string& prefix) override;
  /// Keys held now (tests check that finished communicators leave none).
  [[nodiscard]] std::size_t size();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> data_;
};

}  // namespace loom::bootstrap
