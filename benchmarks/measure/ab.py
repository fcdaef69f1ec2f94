#!/usr/bin/env python3
"""Interleaved A/B runs of loom-perf: the median busbw (or time) per size of each variant.

On shared 2-CPU VMs identical loom-perf runs differ by up to 2x, so one run per variant says
little. This runs every variant once per round, for several rounds (so slow phases of the
machine hit all variants alike), and prints the median of each size, with the spread.

  benchmarks/measure/ab.py -n 4 -r 5 --args "allreduce -b 16M -e 64M -f 2 -n 5 -w 2" \
      default: det:--deterministic chunk128:LOOM_CHUNK_SIZE=128K

A variant is NAME:SPEC, where SPEC is a space-separated mix of VAR=VALUE environment settings
and extra loom-perf flags.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys


def run(binary_dir, ranks, args, spec):
    env = dict(os.environ)
    flags = []
    for item in shlex.split(spec):
        if "=" in item and not item.startswith("-"):
            key, value = item.split("=", 1)
            env[key] = value
        else:
            flags.append(item)
    cmd = [f"{binary_dir}/loomrun", "-n", str(ranks), "--only-rank", "0", "--no-prefix", "--",
           f"{binary_dir}/loom-perf"] + shlex.split(args) + flags + ["--outofplace-only"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=True)
    rows = {}
    for line in out.stdout.splitlines():
        p = line.split()
        if len(p) == 13 and p[0].isdigit():
            rows[int(p[0])] = (float(p[5]), float(p[7]))  # time (us), busbw (GB/s)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", "--ranks", type=int, default=4)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--args", required=True, help="loom-perf arguments shared by all variants")
    ap.add_argument("--time", action="store_true", help="report time (us) instead of busbw")
    ap.add_argument("variants", nargs="+", help="NAME:SPEC")
    a = ap.parse_args()
    variants = [v.split(":", 1) for v in a.variants]
    results = {name: {} for name, _ in variants}
    for _ in range(a.rounds):
        for name, spec in variants:
            for size, (t, bw) in run(a.bin, a.ranks, a.args, spec).items():
                results[name].setdefault(size, []).append(t if a.time else bw)
    metric = "time (us)" if a.time else "busbw (GB/s)"
    base = variants[0][0]
    print(f"# {a.ranks} ranks, {a.rounds} rounds, median {metric} [min-max]; ratio to {base}")
    header = "| size (B) | " + " | ".join(name for name, _ in variants) + " |"
    print(header)
    print("|---:|" + "---:|" * len(variants))
    for size in sorted(results[base]):
        cells = []
        ref = statistics.median(results[base][size])
        for name, _ in variants:
            xs = results[name].get(size, [])
            if not xs:
                cells.append("-")
                continue
            m = statistics.median(xs)
            cell = f"{m:.2f} [{min(xs):.2f}-{max(xs):.2f}]"
            if name != base and ref > 0:
                cell += f" {m / ref:.2f}x"
            cells.append(cell)
        print(f"| {size} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
