#include "options.hpp"

namespace loom::run {

std::string usage_text() {
  return R"(Usage: loomrun -n N [options] [--] program [args...]

Starts N local ranks of `program args...` and waits for them.

Every rank gets, besides the inherited environment:
  LOOM_RANK=r  LOOM_WORLD_SIZE=N  LOOM_LOCAL_RANK=r  LOOM_LOCAL_SIZE=N
  LOOM_ROOT=127.0.0.1:PORT   a free port on this host (see --root)
  LOOM_SECRET=<32 hex>       a random secret shared by the job's ranks
An inherited LOOM_ID is removed (set it with -x if you mean it). Ranks read stdin from
/dev/null. Each rank runs in its own process group; when a rank's main process ends, whatever
is left of its group is killed, and no rank outlives loomrun.

Options:
  -n, --np N             number of ranks (1-1024; required)
  -x NAME=VALUE          set an environment variable for every rank (repeatable)
      --root HOST:PORT   rendezvous address to put in LOOM_ROOT
      --no-prefix        print the ranks' output lines unchanged (no "[r] " prefix)
      --only-rank R      print the stdout of rank R only (stderr of every rank is shown)
      --timeout T        stop the job after T (exit 124)
      --grace T          after a failure, timeout or signal, wait T between SIGTERM and
                         SIGKILL (default 2s)
      --hosts H          spread the ranks over H network namespaces standing in for hosts
                         (consecutive ranks share one): each gets eth0 with 10.199.0.(h+1)/24
                         on a bridge in a further namespace, its ranks LOOM_HOST_ID=its name
                         and per-host LOOM_LOCAL_RANK/SIZE, rank 0's address in LOOM_ROOT.
                         Nothing is added to loomrun's own namespace; all are removed when
                         loomrun ends (stale ones of dead loomruns at the next start). Needs
                         root and `ip` (iproute2).
      --nics K           with --hosts: K interfaces per host (1-8), eth0 to eth(K-1), interface
                         i on its own bridge with 10.199.i.(h+1)/24: several NICs per host
                         (use them with -x LOOM_SOCKET_IFNAME=eth0,eth1,...)
      --nic-rate R       with --hosts: cap what each host interface sends at R (500mbit, 1gbit,
                         ...; a tc token bucket), so one NIC is the bottleneck as on real
                         hardware. Needs `tc` (iproute2)
      --cpu-bind MODE    where the ranks run. block (default): each rank is bound to a
                         contiguous share of the cores loomrun may use, rank r to cores
                         r*C/N up to (r+1)*C/N; with more ranks than cores, consecutive ranks
                         share one core. none: the ranks run wherever loomrun may.
  -h, --help             print this help

T is seconds ("2", "1.5") or has a unit: "500ms", "30s", "5m", "1h".

Output: each line a rank prints is printed whole, as "[r] line", stdout to stdout and stderr to
stderr; a final line without a newline is printed too. Lines never mix mid-line.

When a rank exits non-zero or is killed by a signal, loomrun says which, sends SIGTERM to the
other ranks, SIGKILL after the grace period, and exits 1. SIGINT, SIGTERM and SIGHUP sent to
loomrun are forwarded to the ranks, then the same shutdown follows; a second one kills at once.

Exit status: 0 when every rank exited 0; 1 when a rank failed (or loomrun could not start the
job); 2 for bad usage; 124 on --timeout; 128+S when loomrun was stopped by signal S. A rank
whose program cannot be executed exits 127.
)";
}

}  // namespace loom::run
