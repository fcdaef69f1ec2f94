// The flight recorder (Communicator::flight_record(), LOOM_FLIGHT_RECORDER, LOOM_FLIGHT_DIR),
// threads as ranks: every rank's record lists its collective calls in order, each with what it
// was, its algorithm and submitted <= started <= completed; it keeps exactly the last
// LOOM_FLIGHT_RECORDER calls; with LOOM_FLIGHT_DIR each rank writes its file when a call fails
// (the failed call still running, the failure named) and when the communicator goes.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"

using namespace loom;
using loom::test::Findings;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The record's calls are in order, consistent in time, and match `ops` (the op names).
void check_calls(const json& doc, const std::vector<std::string>& ops, std::uint64_t first_seq,
                 Findings& f, const std::string& what) {
  const json& calls = doc.at("calls");
  if (calls.size() != ops.size()) {
    f.add(what + ": " + std::to_string(calls.size()) + " calls recorded");
    return;
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = what + ", call " + std::to_string(i);
    if (c.at("seq").get<std::uint64_t>() != first_seq + i) f.add(at + ": seq");
    if (c.at("op").get<std::string>() != ops[i]) f.add(at + ": op " + c.at("op").dump());
    if (c.at("state").get<std::string>() != "completed") f.add(at + ": state");
    const auto submitted = c.at("submitted_ns").get<std::int64_t>();
    const auto started = c.at("started_ns").get<std::int64_t>();
    const auto completed = c.at("completed_ns").get<std::int64_t>();
    if (!(submitted > 0 && submitted <= started && started <= completed)) f.add(at + ": times");
  }
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("flight record: each rank's calls in order, with what they were and when", "[flight]") {
  Findings f;
  loom::test::run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> x(1000, 1.0f);
    comm.allreduce(std::span<float>(x), RedOp::Sum).wait();
    comm.broadcast(std::span<float>(x), 1).wait();
    std::vector<std::int32_t> none;
    comm.allgather(std::span<const std::int32_t>(none), std::span<std::int32_t>(none)).wait();
    std::vector<double> in(7 * 3, 2.0), out(7);
    comm.reduce_scatter(std::span<const double>(in), std::span<double>(out), RedOp::Max).wait();
    comm.barrier().wait();
    const json doc = json::parse(comm.flight_record());
    const std::string what = "rank " + std::to_string(r);
    if (doc.at("rank") != r || doc.at("nranks") != 3 || doc.at("reason") != "asked")
      f.add(what + ": header " + doc.dump().substr(0, 200));
    check_calls(doc, {"allreduce", "broadcast", "allgather", "reduce_scatter", "barrier"}, 0, f,
                what);
    const json& calls = doc.at("calls");
    if (calls.size() == 5) {
      if (calls[0].at("dtype") != "float" || calls[0].at("count") != 1000 ||
          calls[0].at("redop") != "sum" || calls[0].at("algorithm").get<std::string>().empty())
        f.add(what + ": allreduce " + calls[0].dump());
      if (calls[1].at("root") != 1) f.add(what + ": broadcast " + calls[1].dump());
      if (calls[2].at("algorithm") != "") f.add(what + ": a call with nothing to do");
      if (calls[3].at("redop") != "max" || calls[3].at("count") != 7)
        f.add(what + ": reduce_scatter " + calls[3].dump());
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// One p2p entry: its direction's peer, message number and count (seq -1: must be null).
void check_direction(const json& e, const char* dir, int peer, std::int64_t seq, std::size_t count,
                     Findings& f, const std::string& what) {
  if (!e.contains(dir)) {
    f.add(what + ": no " + dir + " in " + e.dump());
    return;
  }
  const json& d = e.at(dir);
  const bool seq_ok = seq < 0 ? d.at("seq").is_null() : d.at("seq") == seq;
  if (d.at("peer") != peer || !seq_ok || d.at("count") != count)
    f.add(what + ": " + dir + " " + d.dump());
}

TEST_CASE("flight record: sends and receives, with their peers and message numbers", "[flight]") {
  Findings f;
  loom::test::run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank();
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    std::vector<float> a(5, 1.0f), b(5, 0.0f);
    // #0: rank 0 sends to rank 1 twice, rank 1 receives both.
    if (r == 0) {
      comm.send(std::span<const float>(a), 1, 7).wait();
      comm.send(std::span<const float>(a), 1, 7).wait();
    } else if (r == 1) {
      comm.recv(std::span<float>(b), 0, 7).wait();
      comm.recv(std::span<float>(b), 0, 7).wait();
    }
    comm.barrier().wait();  // collective #0
    // A ring sendrecv, then a group of a send and a receive around the ring the other way.
    comm.sendrecv(a.data(), 5, next, b.data(), 5, prev, DataType::Float32).wait();
    comm.group_start();
    Work s = comm.send(std::span<const float>(a), prev);
    Work q = comm.recv(std::span<float>(b), next);
    comm.group_end();
    s.wait();
    q.wait();
    // Rank 2 receives from any source; rank 0 sends to it.
    int source = -1;
    if (r == 2) comm.recv_any(std::span<float>(b), &source, 3).wait();
    if (r == 0) comm.send(std::span<const float>(a), 2, 3).wait();
    const json doc = json::parse(comm.flight_record());
    const std::string what = "rank " + std::to_string(r);
    const json& p2p = doc.at("p2p");
    const std::size_t expect = r == 0 ? 6 : r == 1 ? 5 : 4;
    if (p2p.size() != expect) {
      f.add(what + ": " + std::to_string(p2p.size()) + " p2p records: " + p2p.dump());
      return;
    }
    for (std::size_t i = 0; i < p2p.size(); ++i) {
      const json& e = p2p[i];
      const std::string at = what + ", p2p " + std::to_string(i);
      if (e.at("id") != i || e.at("state") != "completed" || e.at("dtype") != "float")
        f.add(at + ": " + e.dump());
      const auto sub = e.at("submitted_ns").get<std::int64_t>();
      const auto st = e.at("started_ns").get<std::int64_t>();
      const auto done = e.at("completed_ns").get<std::int64_t>();
      if (!(sub > 0 && sub <= st && st <= done)) f.add(at + ": times " + e.dump());
    }
    std::size_t k = 0;  // this rank's first record after #0's sends and receives
    if (r == 0) {
      check_direction(p2p[0], "send", 1, 0, 5, f, what);
      check_direction(p2p[1], "send", 1, 1, 5, f, what);
      if (p2p[0].at("tag") != 7 || p2p[0].at("before_call") != 0 || p2p[0].contains("recv"))
        f.add(what + ": first send " + p2p[0].dump());
      k = 2;
    } else if (r == 1) {
      check_direction(p2p[0], "recv", 0, 0, 5, f, what);
      check_direction(p2p[1], "recv", 0, 1, 5, f, what);
      k = 2;
    }
    // The ring: rank 0's sends to 1 are numbered after #0's two.
    check_direction(p2p[k], "send", next, r == 0 ? 2 : 0, 5, f, what + " sendrecv");
    check_direction(p2p[k], "recv", prev, r == 1 ? 2 : 0, 5, f, what + " sendrecv");
    if (p2p[k].at("before_call") != 1) f.add(what + ": sendrecv " + p2p[k].dump());
    if (r == 2) {  // the group: two records (send to 1, recv from 0), then the any-source one
      check_direction(p2p[k + 1], "send", prev, 0, 5, f, what + " group send");
      check_direction(p2p[k + 2], "recv", next, 0, 5, f, what + " group recv");
      check_direction(p2p.back(), "recv", 0, 1, 5, f, what + " any source");
    }
    if (r == 0) check_direction(p2p.back(), "send", 2, 1, 5, f, what + " to any source");
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("status(): names the oldest unfinished send or receive", "[flight]") {
  Findings f;
  std::atomic<bool> checked{false};
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> x(3, 1.0f);
    if (comm.rank() == 1) {
      Work w = comm.recv(std::span<float>(x), 0, 9);
      Work w2 = comm.recv(std::span<float>(x), 0, 9);
      const std::string before = comm.status();
      if (before.find("; sends and receives unfinished: recv #0 from rank 0 (3 x float, tag 9) "
                      "(") == std::string::npos ||
          before.find(") and 1 more") == std::string::npos)
        f.add("while waiting: " + before);
      checked = true;
      w.wait();
      w2.wait();
      const std::string after = comm.status();
      if (after.find("unfinished") != std::string::npos) f.add("after: " + after);
    } else {
      while (!checked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      comm.send(std::span<const float>(x), 1, 9).wait();
      comm.send(std::span<const float>(x), 1, 9).wait();
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("flight record: LOOM_FLIGHT_RECORDER bounds it to the last calls", "[flight]") {
  Findings f;
  loom::test::run_ranks(2,
                        [&](Communicator& comm) {
                          std::vector<std::int64_t> x(3, 1);
                          for (int i = 0; i < 40; ++i)
                            comm.allreduce(std::span<std::int64_t>(x), RedOp::Sum).wait();
                          const json doc = json::parse(comm.flight_record());
                          check_calls(doc, std::vector<std::string>(16, "allreduce"), 24, f,
                                      "rank " + std::to_string(comm.rank()));
                        },
                        {{"LOOM_FLIGHT_RECORDER", "16"}});
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("flight record: LOOM_FLIGHT_RECORDER=0 keeps the calls without times; 1-15 refused",
          "[flight]") {
  Findings f;
  loom::test::run_ranks(2,
                        [&](Communicator& comm) {
                          std::vector<std::int64_t> x(3, 1);
                          for (int i = 0; i < 3; ++i)
                            comm.allreduce(std::span<std::int64_t>(x), RedOp::Sum).wait();
                          const json doc = json::parse(comm.flight_record());
                          if (doc.at("calls").size() != 3)
                            f.add("calls: " + doc.at("calls").dump());
                          for (const json& c : doc.at("calls"))
                            if (c.at("submitted_ns") != 0 || !c.at("started_ns").is_null())
                              f.add("timed: " + c.dump());
                        },
                        {{"LOOM_FLIGHT_RECORDER", "0"}});
  INFO(f.first);
  CHECK(f.wrong == 0);
  const auto e = loom::test::error_of([] {
    (void)loom::test::make_comm(std::make_shared<bootstrap::InMemoryStore>(), 0, 1, 0x77,
                                {{"LOOM_FLIGHT_RECORDER", "8"}});
  });
  CHECK(loom::test::names(e, ErrorCode::InvalidUsage, {"LOOM_FLIGHT_RECORDER=8", "below 16"}));
}

TEST_CASE("flight record: LOOM_FLIGHT_DIR files on failure and when the communicator goes",
          "[flight]") {
  const fs::path dir = fresh_dir("loom-flight-test");
  Findings f;
  std::string comm_hex;
  loom::test::EndTogether::Shared together;
  loom::test::run_ranks(
      2,
      [&](Communicator& comm) {
        loom::test::EndTogether end(together, 2);  // rank 1 stays until rank 0 has looked
        std::vector<float> x(10, 1.0f);
        comm.allreduce(std::span<float>(x), RedOp::Sum).wait();
        if (comm.rank() == 1) return;  // rank 0's next call waits for it in vain
        CollOptions opts;
        opts.timeout = std::chrono::milliseconds(300);
        const auto e = loom::test::error_of(
            [&] { comm.allreduce(std::span<float>(x), RedOp::Sum, opts).wait(); });
        if (!e || e->code() != ErrorCode::Timeout) f.add("rank 0: no timeout");
        // Written when the call failed, before anyone destroyed anything.
        bool found = false;
        for (const auto& entry : fs::directory_iterator(dir)) {
          const std::string name = entry.path().filename().string();
          if (name.size() < 5 || name.substr(name.size() - 8) != "-r0.json") continue;
          found = true;
          comm_hex = name.substr(12, 16);
          const json doc = read_json(entry.path());
          if (doc.at("reason") != "failure" ||
              doc.at("status").get<std::string>().find("Timeout") == std::string::npos)
            f.add("rank 0 at failure: " + doc.at("reason").dump() + " " + doc.at("status").dump());
          const json& calls = doc.at("calls");
          if (calls.size() != 2 || calls[1].at("state") != "running" ||
              !calls[1].at("completed_ns").is_null())
            f.add("rank 0 at failure: calls " + calls.dump());
        }
        if (!found) f.add("rank 0: no flight record after the failure");
      },
      {{"LOOM_FLIGHT_DIR", dir.string()}, {"LOOM_TRANSPORTS", "tcp"}});
  // Both communicators are gone: each rank's last word is its record at destruction.
  for (int r = 0; r < 2; ++r) {
    const fs::path p = dir / ("loom-flight-" + comm_hex + "-r" + std::to_string(r) + ".json");
    if (!fs::exists(p)) {
      f.add("no " + p.string());
      continue;
    }
    const json doc = read_json(p);
    if (doc.at("reason") != "destroyed" || doc.at("rank") != r)
      f.add(p.string() + ": " + doc.at("reason").dump());
    if (doc.at("calls").size() != (r == 0 ? 2u : 1u)) f.add(p.string() + ": calls");
  }
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".tmp") f.add("left behind: " + entry.path().string());
  fs::remove_all(dir);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// Ranks as processes (tests/process/flight_recorder.sh, LOOM_FLIGHT_DIR set): 20 allreduces in
// which rank 2 always arrives 40 ms late (far above a loaded machine's scheduling noise), then
// a 21st that the last rank never calls: the others time out after 1 s, and each rank's record
// at the end shows it.
TEST_CASE("process flight: a straggler, then a call one rank never makes", "[.process_flight]") {
  Communicator comm = Communicator::from_env();
  const int r = comm.rank(), n = comm.size();
  std::vector<float> x(4096, 1.0f);
  for (int i = 0; i < 20; ++i) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(40));
    comm.allreduce(std::span<float>(x), RedOp::Max).wait();
  }
  if (r == n - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // past the others' deadline
    std::printf("rank %d: skipped the last call\n", r);
    return;
  }
  CollOptions opts;
  opts.timeout = std::chrono::seconds(1);
  const auto e =
      loom::test::error_of([&] { comm.allreduce(std::span<float>(x), RedOp::Max, opts).wait(); });
  std::printf("rank %d: %s\n", r, e ? std::string(to_string(e->code())).c_str() : "no error");
  std::fflush(stdout);
  CHECK((e && e->code() == ErrorCode::Timeout));
}

// Two ranks as processes (tests/process/flight_recorder.sh, LOOM_FLIGHT_DIR set): rank 0 sends
// rank 1 three messages, both take part in an allreduce, then each waits to receive from the
// other (a pipeline's classic deadlock): both time out after 1 s, and their records show which
// receive each waited in and that the peer never sent it.
TEST_CASE("process p2p flight: two ranks that each wait to receive", "[.process_flight_p2p]") {
  Communicator comm = Communicator::from_env();
  const int r = comm.rank();
  std::vector<float> x(64, 1.0f);
  for (int i = 0; i < 3; ++i) {
    if (r == 0) comm.send(std::span<const float>(x), 1, 5).wait();
    if (r == 1) comm.recv(std::span<float>(x), 0, 5).wait();
  }
  comm.allreduce(std::span<float>(x), RedOp::Sum).wait();
  CollOptions opts;
  opts.timeout = std::chrono::seconds(1);
  const auto e =
      loom::test::error_of([&] { comm.recv(std::span<float>(x), 1 - r, 5, opts).wait(); });
  std::printf("rank %d: %s\n", r, e ? std::string(to_string(e->code())).c_str() : "no error");
  std::fflush(stdout);
  CHECK(e.has_value());
}
