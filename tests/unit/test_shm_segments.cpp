// Shared-memory segments and how they travel (transports/shm/shm_segment.*, fd_mailbox.*): the
// rule that removes a named segment once its owner is provably gone (whatever the segment holds:
// a creator killed before writing the header leaves zeros), and the mailbox that hands over
// anonymous segments only to the rank, process and channel they were published for.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "common/process.hpp"
#include "transport_pairs.hpp"
#include "transports/shm/channel.hpp"
#include "transports/shm/fd_mailbox.hpp"
#include "transports/shm/shm_segment.hpp"
#include "transports/shm/shm_transport.hpp"

using namespace loom;
namespace sh = loom::transport::shm;
namespace lt = loom::test;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

std::string tag(std::uint64_t ns, pid_t pid, std::uint64_t start) {
  return fmt::format("_o{}_{}_{}", ns, pid, start);
}

void touch(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fclose(f);
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

}  // namespace

TEST_CASE("shm: a named segment goes once its owner is provably gone, whatever it holds",
          "[shm][orphans]") {
  char tmpl[] = "/tmp/loom-owners-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::uint64_t ns = proc::own_pid_namespace();
  REQUIRE(ns != 0);
  pid_t dead = ::fork();  // exited and reaped: certainly gone
  if (dead == 0) ::_exit(0);
  REQUIRE(::waitpid(dead, nullptr, 0) == dead);
  pid_t zombie = ::fork();  // exited, not reaped (yet): its corpse will never map anything
  if (zombie == 0) ::_exit(0);
  std::optional<proc::ProcessStat> zstat;
  for (int i = 0; i < 500 && !(zstat && zstat->state == 'Z'); ++i) {
    std::this_thread::sleep_for(2ms);
    zstat = proc::read_process_stat(zombie);
  }
  REQUIRE(zstat);
  REQUIRE(zstat->state == 'Z');
  const pid_t parent = ::getppid();
  const std::uint64_t parent_start = proc::process_start_time(parent);
  REQUIRE(parent_start != 0);

  // Empty files: the segments of creators killed before they wrote anything.
  const std::vector<std::string> gone = {
      "loom-00000000000000c1-0-1-aa" + tag(ns, dead, 123),
      "loom-00000000000000c1-0-1-cc" + tag(ns, parent, parent_start + 1),  // pid reused
      "loom-cipc-00000000000000c1-0-1-ee" + tag(ns, dead, 0),              // start unknown
      "loom-00000000000000c1-1-0-zz" + tag(ns, zombie, zstat->start),
  };
  const std::vector<std::string> kept = {
      "loom-00000000000000c1-0-1-bb" + tag(ns, parent, parent_start),  // alive
      "loom-00000000000000c1-0-1-dd" + tag(ns + 1, dead, 123),         // another pid namespace
      "loom-00000000000000c1-0-1-ff" + sh::owner_tag(),                // ours
      "loom-00000000000000c1-0-1-gg_oX_1_2",                 // no owner: not a channel either
      "other-00000000000000c1-0-1-hh" + tag(ns, dead, 123),  // not loom's
  };
  for (const auto& n : gone) touch(dir + "/" + n);
  for (const auto& n : kept) touch(dir + "/" + n);
  // Communicator 0xc1's own setup does not protect them: an owner that is gone is gone.
  auto removed = sh::remove_orphaned_channels(0xc1, dir);
  std::sort(removed.begin(), removed.end());
  auto want = gone;
  std::sort(want.begin(), want.end());
  CHECK(removed == want);
  for (const auto& n : gone) CHECK_FALSE(exists(dir + "/" + n));
  for (const auto& n : kept) {
    INFO(n);
    CHECK(exists(dir + "/" + n));
    ::unlink((dir + "/" + n).c_str());
  }
  ::rmdir(dir.c_str());
  REQUIRE(::waitpid(zombie, nullptr, 0) == zombie);
}

TEST_CASE("shm: owner tags round trip and malformed ones are refused", "[shm][orphans]") {
  auto mine = sh::parse_owner("/loom-1-0-1-ab" + sh::owner_tag());
  REQUIRE(mine);
  CHECK(mine->pid == ::getpid());
  CHECK(mine->pid_ns == proc::own_pid_namespace());
  CHECK(mine->start == proc::process_start_time(::getpid()));
  CHECK_FALSE(sh::owner_gone(*mine));
  for (const char* bad : {"loom-x", "loom-x_o1_2", "loom-x_o1_2_3x", "loom-x_o1__3",
                          "loom-x_o1_0_3", "loom-x_o1_99999999999_3", "loom-x_o_1_2_3"}) {
    INFO(bad);
    CHECK_FALSE(sh::parse_owner(bad));
  }
}

TEST_CASE("shm: the mailbox hands a descriptor only to the receive it was sent for",
          "[shm][mailbox]") {
  constexpr std::uint64_t kComm = 0xabc;
  auto box = sh::FdMailbox::open(kComm, 1);
  REQUIRE(box.is_ok());
  auto to = sh::DoorbellAddress::from_name(box.value()->name());
  REQUIRE(to.is_ok());
  auto seg = sh::create_anonymous_segment(8192);
  REQUIRE(seg.is_ok());
  CHECK(seg->name.str().empty());
  seg->mapping.data()[100] = 0x5a;
  sh::Letter letter;
  letter.comm_id = kComm;
  letter.from_rank = 0;
  letter.to_rank = 1;
  std::fill(letter.nonce.begin(), letter.nonce.end(), 'a');
  const int fd = seg->fd.get();
  auto send = [&](const sh::Letter& l) {
    Status st = sh::FdMailbox::send(*to, l, fd, Deadline::after(2s));
    INFO(st.message());
    REQUIRE(st.is_ok());
  };
  auto receive = [&](pid_t pid, Clock::duration wait) {
    return box.value()->receive(
        0, pid, letter.nonce,
        Deadline::after(std::chrono::duration_cast<std::chrono::milliseconds>(wait)), {});
  };
  // Another communicator's letter, another channel's, another rank's: none is this channel.
  sh::Letter other_comm = letter;
  other_comm.comm_id = kComm + 1;
  sh::Letter other_nonce = letter;
  other_nonce.nonce[0] = 'b';
  sh::Letter other_rank = letter;
  other_rank.to_rank = 2;
  for (const auto& l : {other_comm, other_nonce, other_rank}) send(l);
  CHECK(receive(::getpid(), 300ms).status().code() == ErrorCode::Timeout);
  // The right letter, but the kernel says it came from another process than the card names.
  send(letter);
  CHECK(receive(::getpid() + 1, 300ms).status().code() == ErrorCode::Timeout);
  // Now for the right process: the descriptor is the segment itself.
  auto got = receive(::getpid(), 2s);
  REQUIRE(got.is_ok());
  auto m = sh::map_segment_fd(got->get(), 8192, 8192, "test");
  REQUIRE(m.is_ok());
  CHECK(m->data()[100] == 0x5a);
  m->data()[200] = 7;
  CHECK(seg->mapping.data()[200] == 7);
  // A check that fails ends the wait with its status.
  auto stopped = box.value()->receive(3, ::getpid(), letter.nonce, Deadline::after(5s), [] {
    return Status(ErrorCode::PeerFailed, "rank 3 failed");
  });
  CHECK(stopped.status().code() == ErrorCode::PeerFailed);
  // A mailbox that is gone belongs to a rank that is gone.
  box.value().reset();
  Status st = sh::FdMailbox::send(*to, letter, fd, Deadline::after(2s));
  CHECK(st.code() == ErrorCode::PeerFailed);
  CHECK(st.peer() == 1);
}

TEST_CASE("shm: ranks that hand over anonymous and named segments connect, leaving nothing",
          "[shm][orphans]") {
  // Rank 0 may only use named segments (as where memfd_create is refused); rank 1 could use
  // either: the pair agrees on named ones, and /dev/shm is clean once both sides mapped them.
  const std::uint64_t comm_id = lt::random_comm_id();
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  sh::ShmOptions named = lt::PairOptions{}.shm;
  named.segments = sh::SegmentKind::Named;
  sh::ShmOptions any = lt::PairOptions{}.shm;
  auto t0 = sh::ShmTransport::create(0, 2, comm_id, store, named);
  auto t1 = sh::ShmTransport::create(1, 2, comm_id, store, any);
  REQUIRE((t0.is_ok() && t1.is_ok()));
  CHECK_FALSE(t0.value()->anonymous());
  CHECK(t1.value()->anonymous() == sh::anonymous_segments_available());
  auto st = lt::run_ranks(
      [&](int r) { return (r == 0 ? t0 : t1).value()->ensure({1 - r}, Deadline::after(20s)); });
  INFO(st[0].message() << " / " << st[1].message());
  REQUIRE((st[0].is_ok() && st[1].is_ok()));
  CHECK(lt::shm_leftovers(comm_id).empty());
  // And LOOM_SHM_SEGMENTS=memfd refuses a peer that cannot take part.
  if (sh::anonymous_segments_available()) {
    const std::uint64_t id2 = lt::random_comm_id();
    sh::ShmOptions memfd = any;
    memfd.segments = sh::SegmentKind::Memfd;
    auto a = sh::ShmTransport::create(0, 2, id2, store, named);
    auto b = sh::ShmTransport::create(1, 2, id2, store, memfd);
    REQUIRE((a.is_ok() && b.is_ok()));
    auto st2 = lt::run_ranks(
        [&](int r) { return (r == 0 ? a : b).value()->ensure({1 - r}, Deadline::after(2s)); });
    CHECK(st2[1].code() == ErrorCode::InvalidUsage);
    CHECK_THAT(st2[1].message(), Contains("LOOM_SHM_SEGMENTS=memfd"));
    CHECK(lt::shm_leftovers(id2).empty());
  }
}

TEST_CASE("shm: LOOM_SHM_SEGMENTS values", "[shm]") {
  CHECK(sh::parse_segment_kind("auto").value() == sh::SegmentKind::Auto);
  CHECK(sh::parse_segment_kind("memfd").value() == sh::SegmentKind::Memfd);
  CHECK(sh::parse_segment_kind("named").value() == sh::SegmentKind::Named);
  auto bad = sh::parse_segment_kind("posix");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::InvalidUsage);
}
