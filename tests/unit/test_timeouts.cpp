// Timeouts: the one rule for 0 and for values too long for the clock (LOOM_TIMEOUT,
// CommOptions::timeout, CollOptions::timeout), and Deadline arithmetic that saturates.
#include <catch2/catch.hpp>
#include <chrono>

#include "common/deadline.hpp"
#include "loom/loom.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using std::chrono::hours;
using std::chrono::milliseconds;

namespace {
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected a loom::Error");
  return Error(ErrorCode::Ok, "");
}

Communicator one_rank(const CommOptions& options) {
  return Communicator(UniqueId::create("127.0.0.1"), 0, 1, options);
}
}  // namespace

TEST_CASE("timeouts: deadlines saturate instead of overflowing", "[timeout]") {
  // 100000000 h is 3.6e23 ns: beyond the clock's 64-bit nanoseconds.
  for (milliseconds d : {milliseconds::max(), milliseconds(hours(100000000)),
                         milliseconds(std::chrono::years(300))}) {
    INFO(d.count() << " ms");
    const Deadline deadline = Deadline::after(d);
    CHECK_FALSE(deadline.expired());
    CHECK(deadline.at() > Clock::now() + hours(24 * 365));
    CHECK(deadline.left(hours(1)) == hours(1));
    CHECK(deadline.poll_timeout_ms(100) == 100);
  }
  const Deadline day = Deadline::after(hours(24));
  CHECK(day.at() > Clock::now() + hours(23));
  CHECK(day.at() <= Clock::now() + hours(24));
  for (milliseconds d : {milliseconds(0), milliseconds(-1), milliseconds::min()}) {
    INFO(d.count() << " ms");
    CHECK(Deadline::after(d).expired());
    CHECK(Deadline::after(d).poll_timeout_ms(100) == 0);
  }
}

TEST_CASE("timeouts: 0, negative and too long CommOptions::timeout are InvalidArgument",
          "[timeout]") {
  for (milliseconds t : {milliseconds(0), milliseconds(-5), milliseconds(hours(721)),
                         milliseconds(hours(100000000))}) {
    INFO(t.count() << " ms");
    CommOptions o;
    o.timeout = t;
    const auto start = Clock::now();
    const Error e = error_of([&] { one_rank(o); });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Contains("CommOptions::timeout") && Contains("allowed: 1ms to 720h"));
    CHECK(Clock::now() - start < std::chrono::seconds(5));
  }
  CommOptions zero;
  zero.timeout = milliseconds(0);
  CHECK_THAT(error_of([&] { one_rank(zero); }).what(), Contains("0 does not mean \"no deadline\""));
}

TEST_CASE("timeouts: LOOM_TIMEOUT=0 is refused like CommOptions::timeout=0", "[timeout]") {
  CommOptions o;
  o.settings.emplace("LOOM_TIMEOUT", "0");  // (operator= trips a GCC 12 -Wrestrict false alarm)
  const Error e = error_of([&] { one_rank(o); });
  CHECK(e.code() == ErrorCode::InvalidUsage);  // a bad setting, as for every setting
  CHECK_THAT(e.what(), Contains("LOOM_TIMEOUT='0'") && Contains("allowed: 1ms to 720h") &&
                           Contains("0 does not mean \"no deadline\""));
}

TEST_CASE("timeouts: a per-call CollOptions::timeout of 0 is refused; the communicator goes on",
          "[timeout]") {
  CommOptions o;
  o.timeout = std::chrono::seconds(30);
  Communicator comm = one_rank(o);
  float in = 2, out = 0;
  for (milliseconds t : {milliseconds(0), milliseconds(-1), milliseconds(hours(721))}) {
    INFO(t.count() << " ms");
    CollOptions co;
    co.timeout = t;
    const Error e =
        error_of([&] { comm.allreduce(&in, &out, 1, DataType::Float32, RedOp::Sum, co); });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Contains("rank 0") && Contains("CollOptions::timeout") &&
                             Contains("allowed: 1ms to 720h"));
  }
  CollOptions ok;
  ok.timeout = hours(720);
  comm.allreduce(&in, &out, 1, DataType::Float32, RedOp::Sum, ok).wait();
  CHECK(out == 2);
}
