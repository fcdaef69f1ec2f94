"""Bus bandwidth and latency of torch.distributed collectives, loom against gloo in the same
job: the default group is gloo, a second group over the same ranks is loom, and every size is
measured on both, alternating which goes first.

    torchrun --standalone --nproc-per-node 4 benchmarks/torch/bench_collectives.py \\
        -b 8 -e 256M -f 4 --json torch-4.json
    python3 benchmarks/plot_busbw.py torch-4-all_reduce.json all_reduce-4.svg

Collectives: all_reduce (in place, fp32 sum), all_gather_into_tensor, reduce_scatter_tensor
(fp32 sum) and all_to_all_single; sizes as in nccl-tests (the size is the larger buffer: the
gathered output, the scattered input). busbw factors: all_reduce 2(n-1)/n, the others (n-1)/n.
A time is the slowest rank's mean over the timed iterations; with --repeat N each size is timed N
times per backend (the backends alternating round by round) and the median is reported, which
keeps a moment of CPU contention on a shared machine out of the table. A collective a backend does not
serve is reported as such. --json PREFIX.json
also writes PREFIX-<collective>.json in loom-perf's JSON format, one run per backend, which
benchmarks/plot_busbw.py draws.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "all_to_all_single": lambda n: (n - 1) / n,
}


def parse_size(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-b", "--begin", default="8")
    p.add_argument("-e", "--end", default="256M")
    p.add_argument("-f", "--factor", type=int, default=4)
    p.add_argument("-c", "--collectives", default=",".join(FACTORS))
    p.add_argument("--backends", default="loom,gloo")
    p.add_argument("--min-seconds", type=float, default=0.2,
                   help="aim for this much timed work per size and backend")
    p.add_argument("--repeat", type=int, default=1,
                   help="time each size this many times per backend, alternating; report the median")
    p.add_argument("--json", help="write results here (and PREFIX-<collective>.json)")
    return p.parse_args()


def make_op(name, size_bytes, ws, group):
    elems = max(1, size_bytes // 4)
    if name == "all_reduce":
        t = torch.ones(elems)
        return lambda: dist.all_reduce(t, group=group)
    per = max(1, elems // ws)
    if name == "all_gather_into_tensor":
        inp, out = torch.ones(per), torch.empty(per * ws)
        return lambda: dist.all_gather_into_tensor(out, inp, group=group)
    if name == "reduce_scatter_tensor":
        inp, out = torch.ones(per * ws), torch.empty(per)
        return lambda: dist.reduce_scatter_tensor(out, inp, group=group)
    inp, out = torch.ones(per * ws), torch.empty(per * ws)
    return lambda: dist.all_to_all_single(out, inp, group=group)


def measure(op, group, timing_group, min_seconds):
    """Mean seconds per call on the slowest rank; the iteration count comes from a probe."""
    op()
    op()  # warm-up (connections, buffers)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    op()
    probe = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(probe, op=dist.ReduceOp.MAX, group=timing_group)
    iters = int(min(1000, max(3, min_seconds / max(probe.item(), 1e-7))))
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=timing_group)
    return mean.item(), iters


def main():
    args = parse_args()
    torch.set_num_threads(1)
    import loom.torch  # noqa: F401

    dist.init_process_group("gloo")
    ws, rank = dist.get_world_size(), dist.get_rank()
    groups = {"gloo": dist.group.WORLD}
    backends = args.backends.split(",")
    if "loom" in backends:
        groups["loom"] = dist.new_group(list(range(ws)), backend="loom")
    sizes, s = [], parse_size(args.begin)
    while s <= parse_size(args.end):
        sizes.append(s)
        s *= args.factor
    if sizes[-1] != parse_size(args.end):
        sizes.append(parse_size(args.end))  # always measure the end size (-e 256M)
    results = []
    if rank == 0:
        print(f"# {ws} ranks, torch {torch.__version__}, loom {loom.torch.loom_version}")
        print(f"# {'collective':24s} {'bytes':>10s} " +
              " ".join(f"{b + ' us':>11s} {b + ' GB/s':>10s}" for b in backends) +
              "  loom/gloo busbw")
    for coll in args.collectives.split(","):
        for i, size in enumerate(sizes):
            row = {"collective": coll, "bytes": size}
            times = {b: [] for b in backends}
            for k in range(max(1, args.repeat)):
                order = backends if (i + k) % 2 == 0 else list(reversed(backends))
                for b in order:
                    if "error" in row.get(b, {}):
                        continue
                    try:
                        op = make_op(coll, size, ws, groups[b])
                        sec, iters = measure(op, groups[b], groups["gloo"], args.min_seconds)
                        times[b].append(sec)
                        row[b] = {"iters": iters}
                    except RuntimeError as e:
                        row[b] = {"error": str(e).splitlines()[0]}
                        dist.barrier(group=groups["gloo"])
            for b in backends:
                if "error" not in row[b]:
                    sec = sorted(times[b])[len(times[b]) // 2]
                    row[b].update({"us": sec * 1e6, "runs_us": [t * 1e6 for t in times[b]],
                                   "busbw_gbs": size / sec / 1e9 * FACTORS[coll](ws)})
            results.append(row)
            if rank == 0:
                cells = []
                for b in backends:
                    r = row[b]
                    cells.append(f"{r['us']:11.1f} {r['busbw_gbs']:10.3f}" if "us" in r
                                 else f"{'n/a':>11s} {'n/a':>10s}")
                ratio = ""
                if all("us" in row.get(b, {}) for b in ("loom", "gloo")):
                    ratio = f"  {row['loom']['busbw_gbs'] / row['gloo']['busbw_gbs']:.2f}x"
                print(f"  {coll:24s} {size:10d} " + " ".join(cells) + ratio, flush=True)
    if rank == 0:
        errors = {(r["collective"], b): r[b]["error"] for r in results for b in backends
                  if "error" in r[b]}
        for (coll, b), msg in sorted(set(errors.items())):
            print(f"# {b} {coll}: {msg}")
        if args.json:
            doc = {"world_size": ws, "torch": torch.__version__, "rows": results}
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
            stem = os.path.splitext(args.json)[0]
            for coll in args.collectives.split(","):
                runs = []
                for b in backends:
                    rows = [{"bytes": r["bytes"], "out_of_place": None,
                             "in_place": {"busbw_gbs": r[b]["busbw_gbs"], "time_us": r[b]["us"]}}
                            for r in results if r["collective"] == coll and "us" in r[b]]
                    if rows:
                        runs.append({"transport": b, "rows": rows})
                with open(f"{stem}-{coll}.json", "w") as f:
                    json.dump({"collective": coll, "nranks": ws, "runs": runs}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
