#include "bootstrap/store.hpp"

#include <charconv>
#include <chrono>
#include <string_view>
#include <thread>

#include "bootstrap/tcp_store_wire.hpp"

namespace loom::bootstrap {
namespace {

// After a timeout, probing more than this many ranks for diagnostics is not worth the time.
constexpr int kMaxProbes = 256;
constexpr std::size_t kMaxListedRanks = 16;

Status check_rank(std::string_view op, const std::string& name, int rank, int nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return make_error(ErrorCode::InvalidArgument, "{} '{}': invalid rank {} of {}", op, name, rank,
                      nranks);
  }
  return Status::ok();
}

std::string rank_key(const std::string& prefix, int rank) {
  return prefix + "/" + std::to_string(rank);
}

std::string list_ranks(const std::vector<int>& ranks, bool truncated) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < kMaxListedRanks; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  if (ranks.size() > kMaxListedRanks || truncated) out += ", ...";
  return out;
}

// Called after the get of `first_missing`'s key timed out: finds which ranks have not published
// yet with non-waiting gets, and builds the Timeout status.
Status gather_timeout(Store& store, const std::string& prefix, int n, int first_missing) {
  std::vector<int> missing{first_missing};
  bool truncated = false;
  int probes = 0;
  for (int r = first_missing + 1; r < n; ++r) {
    if (++probes > kMaxProbes) {
      truncated = true;
      break;
    }
    auto probe = store.get(rank_key(prefix, r), Deadline::after(std::chrono::milliseconds(0)));
    if (probe.is_ok()) continue;
    if (probe.status().code() != ErrorCode::Timeout) {  // store broken: stop diagnosing
      truncated = true;
      break;
    }
    missing.push_back(r);
  }
  return make_error(ErrorCode::Timeout, "gather '{}': timed out waiting for {} rank(s): {}", prefix,
                    missing.size(), list_ranks(missing, truncated));
}

// How long one slice of a checked wait lasts where the store pushes vanished clients (see
// Store::waits_end_on_gone): the check also covers failures known otherwise.
constexpr std::chrono::milliseconds kPushedSlice{30'000};

// How long one slice of a checked wait lasts: longer in a big job, so that the re-asked
// gathers and liveness checks of n waiting ranks stay O(1) per rank per second at the server.
std::chrono::milliseconds check_slice(int nranks) {
  return std::chrono::milliseconds(250) + std::chrono::milliseconds(nranks);
}

// The done value: "1" when every rank arrived, "fail <code> <rank>\n<reason>" when one will not.
constexpr std::string_view kFailPrefix = "fail ";

Status failed_barrier(const Bytes& done, const std::string& context, int nranks) {
  std::string_view text = as_text(done);
  if (text.rfind(kFailPrefix, 0) != 0) return Status::ok();
  text.remove_prefix(kFailPrefix.size());
  int code = 0;
  int rank = -1;
  auto end = text.data() + text.size();
  auto [p1, e1] = std::from_chars(text.data(), end, code);
  if (e1 != std::errc() || p1 == end || *p1 != ' ')
    return make_error(ErrorCode::Internal, "{}: unreadable failure record", context);
  auto [p2, e2] = std::from_chars(p1 + 1, end, rank);
  if (e2 != std::errc() || rank < 0 || rank >= nranks || code <= 0 ||
      code > static_cast<int>(ErrorCode::Internal))
    return make_error(ErrorCode::Internal, "{}: unreadable failure record", context);
  std::string_view reason = p2 < end && *p2 == '\n' ? std::string_view(p2 + 1, end - p2 - 1) : "";
  return make_error(static_cast<ErrorCode>(code), "{}: rank {} failed before reaching it: {}",
                    context, rank, reason);
}

}  // namespace

Result<Bytes> store_get_checked(Store& store, const std::string& key, Deadline deadline,
                                const WaitCheck& check, int waiters) {
  if (!check) return store.get(key, deadline);
  const bool pushed = store.waits_end_on_gone();  // as in store_allgather
  for (;;) {
    const Deadline slice =
        deadline.earliest(Deadline::after(pushed ? kPushedSlice : check_slice(waiters)));
    auto got = pushed ? store.get_or_gone(key, slice) : store.get(key, slice);
    if (got.is_ok() || got.status().code() != ErrorCode::Timeout || deadline.expired()) return got;
    LOOM_RETURN_IF_ERROR(check());
  }
}

Result<std::int64_t> parse_counter(std::span<const std::uint8_t> bytes, const std::string& key) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return make_error(ErrorCode::InvalidArgument,
                      "key '{}' does not hold a counter (a decimal integer)", key);
  }
  return value;
}

Bytes format_counter(std::int64_t value) {
  std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

Result<std::int64_t> counter_add(const Bytes* current, std::int64_t delta, const std::string& key) {
  std::int64_t base = 0;
  if (current != nullptr) {
    LOOM_ASSIGN_OR_RETURN(base, parse_counter(*current, key));
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(base, delta, &sum)) {
    return make_error(ErrorCode::InvalidArgument, "counter '{}' overflows: {} + {}", key, base,
                      delta);
  }
  return sum;
}

Result<std::vector<Bytes>> Store::gather(const std::string& prefix, int n, Deadline deadline) {
  std::vector<Bytes> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto got = get(rank_key(prefix, r), deadline);
    if (!got.is_ok()) {
      if (got.status().code() == ErrorCode::Timeout) return gather_timeout(*this, prefix, n, r);
      return got.status();
    }
    out[static_cast<std::size_t>(r)] = std::move(got).value();
  }
  return out;
}

Result<std::optional<Bytes>> Store::peek(const std::string& key, Deadline /*answer_by*/) {
  auto got = get(key, Deadline::after(std::chrono::milliseconds(0)));
  if (got.is_ok()) return std::optional<Bytes>(std::move(got).value());
  if (got.status().code() == ErrorCode::Timeout) return std::optional<Bytes>();
  return got.status();
}

std::string gone_key(std::int64_t n) {
  return wire::kGoneKey + std::to_string(n);
}

Result<int> Store::watch(const std::vector<std::string>& keys, Deadline deadline) {
  constexpr std::chrono::milliseconds kLook{50};
  for (;;) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto got = get(keys[i], Deadline::after(std::chrono::milliseconds(0)));
      if (got.is_ok()) return static_cast<int>(i);
      if (got.status().code() != ErrorCode::Timeout) return got.status();
    }
    if (deadline.expired())
      return make_error(ErrorCode::Timeout, "store watch of {} keys: timed out", keys.size());
    std::this_thread::sleep_for(deadline.left(kLook));
  }
}

Result<std::vector<Bytes>> store_allgather(Store& store, const std::string& prefix, int rank,
                                           int nranks, std::span<const std::uint8_t> value,
                                           Deadline deadline, const WaitCheck& check) {
  LOOM_RETURN_IF_ERROR(check_rank("allgather", prefix, rank, nranks));
  const std::string context = fmt::format("allgather '{}' (rank {} of {})", prefix, rank, nranks);
  LOOM_RETURN_IF_ERROR(store.set(rank_key(prefix, rank), value).with_context(context));
  // A store that ends the gather when a client vanishes pushes what the check looks for: then
  // a waiting rank asks again only every kPushedSlice (its check also covers failures known
  // otherwise), not every check_slice.
  const bool pushed = check && store.waits_end_on_gone();
  for (;;) {
    const Deadline slice =
        check ? deadline.earliest(Deadline::after(pushed ? kPushedSlice : check_slice(nranks)))
              : deadline;
    auto all =
        pushed ? store.gather_or_gone(prefix, nranks, slice) : store.gather(prefix, nranks, slice);
    if (all.is_ok() || all.status().code() != ErrorCode::Timeout || deadline.expired())
      return all.is_ok() ? std::move(all)
                         : Result<std::vector<Bytes>>(all.status().with_context(context));
    LOOM_RETURN_IF_ERROR(check());
  }
}

Status store_barrier(Store& store, const std::string& name, int rank, int nranks, Deadline deadline,
                     const WaitCheck& check) {
  LOOM_RETURN_IF_ERROR(check_rank("barrier", name, rank, nranks));
  const std::string context = fmt::format("barrier '{}' (rank {} of {})", name, rank, nranks);
  const std::string count_key = name + "/count";
  const std::string done_key = name + "/done";
  auto added = store.add(count_key, 1);
  if (!added.is_ok()) return added.status().with_context(context);
  const std::int64_t arrived = added.value();
  if (arrived > nranks) {
    return make_error(ErrorCode::InvalidUsage,
                      "{}: {} ranks entered it (a barrier name must be used only once)", context,
                      arrived);
  }
  if (arrived == nranks) {
    const std::uint8_t one[] = {'1'};
    LOOM_RETURN_IF_ERROR(store.set(done_key, one).with_context(context));
  }
  auto done = store_get_checked(store, done_key, deadline, check, nranks);
  if (done.is_ok()) return failed_barrier(done.value(), context, nranks);
  if (done.status().code() != ErrorCode::Timeout) return done.status().with_context(context);
  std::string how_many = "not all ranks arrived";
  auto count = store.get(count_key, Deadline::after(std::chrono::milliseconds(0)));
  if (count.is_ok()) {
    auto n = parse_counter(count.value(), count_key);
    if (n.is_ok()) how_many = fmt::format("only {} of {} ranks arrived", n.value(), nranks);
  }
  return make_error(ErrorCode::Timeout, "{}: timed out; {}", context, how_many);
}

Status store_barrier_fail(Store& store, const std::string& name, int rank, const Status& why) {
  LOOM_ASSIGN_OR_RETURN(std::int64_t first, store.add(name + "/failed", 1));
  if (first != 1) return Status::ok();  // another rank's reason already stands
  const std::string text =
      fmt::format("{}{} {}\n{}", kFailPrefix, static_cast<int>(why.code()), rank, why.message());
  return store.set(name + "/done",
                   {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

}  // namespace loom::bootstrap
