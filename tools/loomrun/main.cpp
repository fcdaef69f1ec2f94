// loomrun: starts N local ranks of a program with the environment loom reads, prefixes their
// output with the rank, and stops the whole job when one rank fails. See usage.cpp.
#include <signal.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "environment.hpp"
#include "fd.hpp"
#include "job.hpp"
#include "netns.hpp"
#include "options.hpp"
#include "output.hpp"
#include "signals.hpp"

int main(int argc, char** argv) {
  using namespace loom::run;
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  ParseResult parsed = parse_args(args);
  if (parsed.kind == ParseResult::Kind::Help) {
    std::cout << usage_text();
    return kExitOk;
  }
  if (parsed.kind == ParseResult::Kind::Error) {
    report("error: " + parsed.error);
    report("try 'loomrun --help'");
    return kExitUsage;
  }
  try {
    JobIdentity identity = make_job_identity(parsed.options);
    std::optional<HostNamespaces> hosts;  // removed when main returns, also after a failure
    if (parsed.options.hosts > 0) {
      // A stop signal during the setup must not kill loomrun before it can remove what it made.
      sigset_t stop, old;
      sigemptyset(&stop);
      for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
      sigprocmask(SIG_BLOCK, &stop, &old);
      try {
        hosts.emplace(parsed.options.hosts,
                      HostNetwork{parsed.options.nics, parsed.options.nic_rate});
      } catch (...) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        throw;
      }
      timespec now{};
      int sig = sigtimedwait(&stop, nullptr, &now);
      sigprocmask(SIG_SETMASK, &old, nullptr);
      if (sig > 0) {
        report("stopped by " + signal_name(sig) + " while creating the network namespaces");
        return kExitSignalBase + sig;
      }
      for (int h = 0; h < hosts->hosts(); ++h) identity.host_ids.push_back(hosts->name(h));
      identity.root = HostNamespaces::address(0) + ":" + std::to_string(find_free_port());
    }
    Job job(parsed.options, identity);
    return job.run();
  } catch (const RunError& e) {
    report(std::string("error: ") + e.what());
    return kExitFailed;
  }
}
