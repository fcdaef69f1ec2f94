#include "transports/shm/shm_policy.hpp"

namespace loom::transport::shm {

Result<std::size_t> single_copy_min_from(const config::Config& cfg) {
  const std::string text = cfg.get_string("LOOM_SHM_SINGLE_COPY_MIN");
  if (text == "auto") return std::size_t{0};
  auto bytes = config::parse_size(text);
  if (!bytes || *bytes == 0)
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_SHM_SINGLE_COPY_MIN='{}' is not auto or a positive size", text);
  return static_cast<std::size_t>(*bytes);
}

Result<std::size_t> single_copy_max_from(const config::Config& cfg) {
  const std::string text = cfg.get_string("LOOM_SHM_SINGLE_COPY_MAX");
  if (text == "auto") return std::size_t{0};
  auto bytes = config::parse_size(text);
  if (!bytes || *bytes == 0)
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_SHM_SINGLE_COPY_MAX='{}' is not auto or a positive size", text);
  return static_cast<std::size_t>(*bytes);
}

}  // namespace loom::transport::shm
