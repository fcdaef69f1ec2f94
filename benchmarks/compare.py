#!/usr/bin/env python3
"""Compare loom's allreduce with Open MPI's MPI_Allreduce and Gloo's ring allreduce (or loom's
alltoall, alltoallv, gather, scatter or sendrecv with Open MPI's and with the host's copy
ceiling, --collective).

For each rank count it runs, back to back, loom-perf and the baselines built from
benchmarks/baselines/ (mpi-allreduce-perf, gloo-allreduce-perf) over the same sizes, all fp32
sum with every element checked, parses their nccl-tests style tables and prints one markdown table
per rank count with loom's out-of-place busbw and time, each baseline's busbw, and the ratios.

  python3 benchmarks/compare.py           # 2 and 4 ranks, 8 B .. 128 MiB (-b 8 -e 256M -f 4)
  python3 benchmarks/compare.py --ranks 2 --sizes "-b 8 -e 16M -f 16" --iters 5
  python3 benchmarks/compare.py --loom-env "LOOM_TRANSPORTS=tcp" --baselines mpi-tcp,gloo
  python3 benchmarks/compare.py --collective alltoall --ranks 2,4,8 --sizes "-b 64K -e 16M -f 4"
  python3 benchmarks/compare.py --collective gather --root 0 --ranks 4 --baselines mpi-shm
  python3 benchmarks/compare.py --collective sendrecv --ranks 2 --baselines copy

--collective alltoall, alltoallv, gather, scatter, allgather, reducescatter, broadcast or reduce
runs `loom-perf COLL` against mpi-exchange-perf (MPI_Alltoall, MPI_Alltoallv, MPI_Gather,
MPI_Scatter, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce; no Gloo baseline),
with the sizes and busbw factors of loom-perf (see `loom-perf --help`: size counts the blocks of
all ranks for all but broadcast and reduce; alltoallv uses loom-perf's skewed split on both
sides).
--collective sendrecv (each rank sends to the next and receives from the previous) has the
baselines mpi-shm, mpi-tcp (MPI_Sendrecv) and copy.

Baselines: mpi-shm (Open MPI, --mca btl vader,self), mpi-tcp (--mca btl tcp,self), gloo (Gloo's
TCP ring on 127.0.0.1), copy (copy-ceiling: one thread per rank making only the memcpy calls
a single-copy implementation must make, all at once: the most the host's memory allows; for
alltoall, sendrecv, gather and scatter), loopback (copy-ceiling sendrecv --tcp: what one plain TCP
connection per pair carries on 127.0.0.1, for sendrecv over tcp). Both MPI runs pass --mca pml ob1 so the BTL choice takes effect (UCX's
pml would ignore it). A ratio is loom busbw / baseline busbw, which for the same size and rank
count equals baseline time / loom time; it is computed from the times (more digits than the
printed busbw). Above 1 means loom is faster. Below 1 KiB busbw is ~0 and the ratio is a latency
ratio. Exits 1, printing the run's output, when a run exits non-zero, reports #wrong != 0 or
misses a size.
"""

import argparse
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINES = {
    "mpi-shm": "MPI-shm",
    "mpi-tcp": "MPI-tcp",
    "gloo": "Gloo",
    "copy": "copy",
    "loopback": "loopback",
    "loom-b": "loom-B",
}
LATENCY_LIMIT = 1024  # bytes; below it the ratio is a latency ratio
EXCHANGE = ["alltoall", "alltoallv", "gather", "scatter", "sendrecv", "allgather", "reducescatter",
            "broadcast", "reduce"]  # mpi-exchange-perf's
ROOTED = ["gather", "scatter", "broadcast", "reduce"]
COPY = ["alltoall", "gather", "scatter", "sendrecv"]  # copy-ceiling's


class RunError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--ranks", default="2,4", help="comma list of rank counts (default 2,4)")
    p.add_argument("--sizes", default="-b 8 -e 256M -f 4",
                   help='size flags passed to every program (default "-b 8 -e 256M -f 4")')
    p.add_argument("--iters", type=int, default=20, help="timed iterations, -n (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="warmup iterations, -w (default 5)")
    p.add_argument("--loom-env", default="",
                   help='extra NAME=VALUE settings for the loom runs, e.g. "LOOM_TRANSPORTS=tcp"')
    p.add_argument("--loom-args", default="",
                   help='extra loom-perf arguments, e.g. "--device host-shared" (buffers from '
                        'loom::host_alloc)')
    p.add_argument("--collective", default="allreduce", choices=["allreduce"] + EXCHANGE,
                   help="the collective compared (default allreduce)")
    p.add_argument("--root", type=int, default=0, help="root of gather, scatter, broadcast and reduce (default 0)")
    p.add_argument("--baselines", default=None,
                   help="comma list of mpi-shm, mpi-tcp, gloo, copy, loopback (default all "
                        "that have the "
                        "collective); empty for none")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the interleaved set R times and report per-size medians (default 1)")
    p.add_argument("--out", help="also write the markdown to this file")
    p.add_argument("--log-dir", help="save every run's full output in this directory")
    p.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"),
                   help="where loomrun, loom-perf and the baselines are (default build/bin)")
    p.add_argument("--loom-b", metavar="DIR",
                   help="another loom build's bin directory (loomrun, loom-perf), run as the "
                        "baseline loom-B with the same flags: before/after a change in one run")
    p.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun", help="mpirun to use")
    p.add_argument("--mpi-args", default="",
                   help='extra mpirun arguments for the MPI runs, e.g. "--bind-to none"')
    p.add_argument("--cpu-bind", default="auto", choices=["auto", "none", "block"],
                   help="loomrun --cpu-bind for the loom and Gloo runs (default auto: block, one "
                        "rank per core, where the ranks fit the cores, as mpirun binds them there; "
                        "none where they outnumber the cores, as mpirun --oversubscribe leaves "
                        "them, so all compare alike)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run (default 3600)")
    args = p.parse_args(argv)
    try:
        args.ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
    except ValueError:
        p.error(f"--ranks: not a comma list of integers: {args.ranks!r}")
    if not args.ranks or min(args.ranks) < 1:
        p.error("--ranks needs rank counts >= 1")
    if args.baselines is None:
        args.baselines = "mpi-shm,mpi-tcp" + (",gloo" if args.collective == "allreduce" else "") + (
            ",copy" if args.collective in COPY else "")
    args.baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    if args.loom_b and "loom-b" not in args.baselines:
        args.baselines.insert(0, "loom-b")
    if "loom-b" in args.baselines and not args.loom_b:
        p.error("--baselines loom-b needs --loom-b DIR")
    for b in args.baselines:
        if b not in BASELINES:
            p.error(f"--baselines: unknown baseline {b!r} (known: {', '.join(BASELINES)})")
        if b == "gloo" and args.collective != "allreduce":
            p.error(f"--baselines: gloo has no {args.collective} baseline")
        if b == "loopback" and args.collective != "sendrecv":
            p.error("--baselines: loopback is a sendrecv baseline")
        if b == "copy" and args.collective not in COPY:
            p.error(f"--baselines: copy has no {args.collective} baseline "
                    f"(it has {', '.join(COPY)})")
    args.loom_env = shlex.split(args.loom_env)
    for item in args.loom_env:
        if "=" not in item or item.startswith("="):
            p.error(f"--loom-env: {item!r} is not NAME=VALUE")
    args.sizes = shlex.split(args.sizes)
    args.loom_args = shlex.split(args.loom_args)
    args.mpi_args = shlex.split(args.mpi_args)
    if args.iters < 1 or args.warmup < 0 or args.repeat < 1:
        p.error("--iters and --repeat need >= 1, --warmup >= 0")
    return args


def program(args, name):
    path = os.path.join(args.bin_dir, name)
    if not os.access(path, os.X_OK):
        hint = ""
        if name.startswith(("mpi-", "gloo-", "copy-")):
            hint = (" (built from benchmarks/baselines/ only when its library was found; "
                    "build it, or leave it out with --baselines)")
        raise RunError(f"{path} is missing or not executable{hint}")
    return path


def commands(args, nranks):
    """The (label, argv) of every run for one rank count, loom first."""
    bench = args.sizes + ["-n", str(args.iters), "-w", str(args.warmup)]
    bind = args.cpu_bind
    if bind == "auto":
        bind = "block" if nranks <= (os.cpu_count() or 1) else "none"
    loomrun = [program(args, "loomrun"), "-n", str(nranks), "--only-rank", "0", "--no-prefix",
               "--cpu-bind", bind]
    runs = []
    env_flags = [f for item in args.loom_env for f in ("-x", item)]
    coll = args.collective
    if coll == "allreduce":
        loom_args = ["allreduce", "-d", "float", "-o", "sum"]
        mpi_args = [program(args, "mpi-allreduce-perf"), "-d", "float"]
    else:
        rooted = ["-r", str(args.root)] if coll in ROOTED else []
        loom_args = [coll, "-d", "float"] + rooted
        mpi_args = [program(args, "mpi-exchange-perf"), coll, "-d", "float"] + rooted
    runs.append(("loom", loomrun + env_flags + [program(args, "loom-perf")] + loom_args +
                 args.loom_args + bench))
    if "loom-b" in args.baselines:
        other = [os.path.join(args.loom_b, "loomrun")] + loomrun[1:]
        runs.append(("loom-b", other + env_flags + [os.path.join(args.loom_b, "loom-perf")] +
                     loom_args + args.loom_args + bench))
    mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(nranks),
              "--mca", "pml", "ob1"] + args.mpi_args
    for b in args.baselines:
        if b == "loom-b":
            continue  # right after loom, above
        if b in ("mpi-shm", "mpi-tcp"):
            btl = "vader,self" if b == "mpi-shm" else "tcp,self"
            runs.append((b, mpirun + ["--mca", "btl", btl] + mpi_args + bench))
        elif b in ("copy", "loopback"):
            rooted = ["-r", str(args.root)] if coll in ROOTED else []
            tcp = ["--tcp"] if b == "loopback" else []
            runs.append((b, [program(args, "copy-ceiling"), coll, "--ranks", str(nranks),
                             "-d", "float"] + rooted + tcp + bench))
        else:
            runs.append((b, loomrun + [program(args, "gloo-allreduce-perf"), "-d", "float"] +
                         bench))
    return runs


def parse_table(text):
    """{bytes: {"time": us, "busbw": GB/s, "bad": [...]}} from the rows of a loom-perf style table.

    time and busbw are the out-of-place half's; "bad" lists the #wrong fields of the halves that
    ran that are not "0" (a count, or N/A for a half that ran unchecked); a half that did not run
    (time N/A: sendrecv's and copy-ceiling's in-place half) is left out."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("#") or len(fields) != 13 or not fields[0].isdigit():
            continue
        bad = [w for t, w in ((fields[5], fields[8]), (fields[9], fields[12]))
               if w != "0" and not (t == "N/A" and w == "N/A")]
        try:
            rows[int(fields[0])] = {"time": float(fields[5]), "busbw": float(fields[7]),
                                    "bad": bad}
        except ValueError:
            rows[int(fields[0])] = {"time": 0.0, "busbw": 0.0, "bad": bad or ["N/A"]}
    return rows


def run(label, argv, nranks, timeout, log=None):
    print(f"$ {shlex.join(argv)}", flush=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise RunError(f"{label} on {nranks} ranks timed out after {timeout:.0f} s") from e
    elapsed = time.monotonic() - start
    output = proc.stdout + (("\n--- stderr ---\n" + proc.stderr) if proc.stderr.strip() else "")
    if log:
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"$ {shlex.join(argv)}\n# exit status {proc.returncode}, {elapsed:.1f} s\n")
            f.write(output)
    if proc.returncode != 0:
        raise RunError(f"{label} on {nranks} ranks exited with status {proc.returncode}:\n"
                       f"{output}")
    rows = parse_table(proc.stdout)
    if not rows:
        raise RunError(f"{label} on {nranks} ranks printed no table:\n{output}")
    wrong = {size: r["bad"] for size, r in rows.items() if r["bad"]}
    if wrong or "FAILED" in proc.stdout:
        raise RunError(f"{label} on {nranks} ranks reported wrong results {wrong}:\n{output}")
    print(f"  ({label}: {len(rows)} sizes, {elapsed:.1f} s)", flush=True)
    return rows


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def fmt_time(us):
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def median_rows(samples):
    """Per-size median of time and busbw over repeats (lists of row dicts)."""
    sizes = set(samples[0])
    for s in samples[1:]:
        sizes &= set(s)
    return {size: {"time": statistics.median(s[size]["time"] for s in samples),
                   "busbw": statistics.median(s[size]["busbw"] for s in samples)}
            for size in sizes}


def check_sizes(nranks, samples):
    """Every run of every program must have printed the same sizes as loom's first run."""
    expected = set(samples["loom"][0])
    for label, runs in samples.items():
        for rows in runs:
            differ = sorted(expected ^ set(rows))
            if differ:
                raise RunError(f"{label} and loom on {nranks} ranks ran different sizes: "
                               f"{differ}")


def table(nranks, results, baselines, repeat, collective="allreduce", root=0):
    loom = results["loom"]
    names = [BASELINES[b] for b in baselines]
    what = "fp32" + (" sum" if collective in ("allreduce", "reducescatter", "reduce") else "")
    if collective in ROOTED:
        what += f", root {root}"
    lines = [f"### {collective}, {what}, {nranks} ranks"
             + (f" (median of {repeat} runs)" if repeat > 1 else ""), ""]
    head = (["size", "loom busbw (GB/s)", "loom time (us)"] + [f"{n} busbw" for n in names] +
            [f"loom/{n}" for n in names])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---:"] * len(head)) + "|")
    for size in sorted(loom):
        cells = [human(size), f"{loom[size]['busbw']:.2f}", fmt_time(loom[size]["time"])]
        cells += [f"{results[b][size]['busbw']:.2f}" for b in baselines]
        for b in baselines:
            t_loom, t_base = loom[size]["time"], results[b][size]["time"]
            ratio = t_base / t_loom if t_loom > 0 else float("inf")
            cells.append(f"{ratio:.2f}" + (" (lat)" if size < LATENCY_LIMIT else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Out-of-place time (us), {nranks} ranks:", ""]
    head = ["size", "loom"] + names
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---:"] * len(head)) + "|")
    for size in sorted(loom):
        cells = [human(size), fmt_time(loom[size]["time"])]
        cells += [fmt_time(results[b][size]["time"]) for b in baselines]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    u = platform.uname()
    return f"{os.cpu_count()} CPUs ({model}){mem}, {u.system} {u.release} {u.machine}"


def provenance(args):
    """The repository's commit (and whether the tree is dirty) and loom-perf's build time."""
    try:
        rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    try:
        built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(
            os.stat(os.path.join(args.bin_dir, "loom-perf")).st_mtime))
    except OSError:
        built = "unknown"
    return f"Tree: {rev}; loom-perf built {built}."


def loadavg():
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main(argv):
    args = parse_args(argv)
    names = {"gloo": "Gloo", "loom-b": "loom-B", "copy": "copy", "loopback": "loopback"}
    vs = " vs ".join(["loom"] + list(dict.fromkeys(names.get(b, "Open MPI")
                                                   for b in args.baselines)))
    out = [f"## {vs}: {args.collective}", "",
           f"Machine: {machine()}. Load average at start: {loadavg()}.",
           provenance(args) + (f" loom-B: {args.loom_b}." if args.loom_b else ""),
           f"Sizes: `{shlex.join(args.sizes)}`, -n {args.iters} -w {args.warmup}"
           + (f", loom env: `{shlex.join(args.loom_env)}`" if args.loom_env else "")
           + (f", loom-perf: `{shlex.join(args.loom_args)}`" if args.loom_args else "") + ".",
           "Ratios: loom busbw / baseline busbw (= baseline time / loom time); > 1 means loom is "
           "faster; (lat) marks sizes below 1 KiB, where it is a latency ratio.", ""]
    ran = []
    try:
        for nranks in args.ranks:
            runs = commands(args, nranks)
            samples = {label: [] for label, _ in runs}
            for rep in range(args.repeat):
                for label, cmd in runs:  # interleaved: loom, then each baseline
                    log = None
                    if args.log_dir:
                        os.makedirs(args.log_dir, exist_ok=True)
                        log = os.path.join(args.log_dir, f"{nranks}ranks-{label}-{rep + 1}.txt")
                    samples[label].append(run(label, cmd, nranks, args.timeout, log))
                    ran.append(shlex.join(cmd))
            check_sizes(nranks, samples)
            results = {label: median_rows(s) for label, s in samples.items()}
            out += table(nranks, results, args.baselines, args.repeat, args.collective, args.root)
    except RunError as e:
        print(f"\ncompare.py: FAILED: {e}", file=sys.stderr)
        return 1
    out += [f"Load average at end: {loadavg()}.", "", "Commands, in the order run:", "", "```"]
    out += list(dict.fromkeys(ran)) + ["```", ""]
    text = "\n".join(out)
    print("\n" + text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
