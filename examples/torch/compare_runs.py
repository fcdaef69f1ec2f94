"""Runs examples/torch/ddp_transformer.py under torchrun in several configurations and compares
them:

  1. loom and gloo at 1, 2 and 4 ranks: per-step loss differences (and vs 1 rank);
  2. LOOM_DETERMINISTIC=1 at 4 ranks on three placements (one host over shared memory; two
     fake hosts, LOOM_HOST_ID, so tcp between them and another schedule; all tcp with the tree
     algorithm): losses and final parameters must be bitwise identical;
  3. a checkpoint saved by a loom run at step 50 resumed under gloo, and the other way round,
     against the uninterrupted runs;
  4. the median DDP step time of each backend at 4 ranks.

    python3 examples/torch/compare_runs.py --out-dir /tmp/ddp   (about 10 min on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ddp_transformer.py"


def run(out_dir: Path, name: str, backend: str, nproc: int, extra=(), env=None) -> dict:
    out = out_dir / f"{name}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", str(SCRIPT), "--backend", backend, "--out", str(out),
           *extra]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    print(f"== {name}: {' '.join(cmd[3:])} {' '.join(f'{k}={v}' for k, v in (env or {}).items())}",
          flush=True)
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit(f"{name} failed with exit code {proc.returncode}")
    print("   " + proc.stdout.strip().splitlines()[-1], flush=True)
    return json.loads(out.read_text())


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", default="ddp-runs")
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps = ["--steps", str(args.steps)]
    r = {}
    for n in (1, 2, 4):
        for b in ("gloo", "loom"):
            r[(b, n)] = run(out, f"{b}-{n}", b, n, steps)
    det = {}
    placements = {
        "one host (shm)": {},
        "two fake hosts (LOOM_HOST_ID)": {"DDP_FAKE_HOSTS": "2"},
        "all tcp, tree": {"LOOM_TRANSPORTS": "tcp", "LOOM_ALGO": "tree"},
    }
    for i, (label, env) in enumerate(placements.items()):
        det[label] = run(out, f"det-{i}", "loom", 4, steps, {"LOOM_DETERMINISTIC": "1", **env})
    half = str(args.steps // 2)
    ck = {}
    for first, second in (("loom", "gloo"), ("gloo", "loom")):
        path = out / f"ckpt-{first}.pt"
        run(out, f"ckpt-{first}-first-half", first, 2, ["--steps", half, "--save", str(path)])
        ck[(first, second)] = run(out, f"ckpt-{first}-then-{second}", second, 2,
                                  [*steps, "--resume", str(path)])

    print("\n## Loss, loom vs gloo (fp32, same seeds, 100 steps)\n")
    print("| ranks | max abs loss diff loom vs gloo | final loss gloo | final loss loom | "
          "max abs diff vs 1 rank (loom) |")
    print("|---|---|---|---|---|")
    for n in (1, 2, 4):
        g, lo = r[("gloo", n)]["losses"], r[("loom", n)]["losses"]
        print(f"| {n} | {max_diff(g, lo):.3g} | {g[-1]:.6f} | {lo[-1]:.6f} | "
              f"{max_diff(lo, r[('loom', 1)]['losses']):.3g} |")
    print("\n## Deterministic mode (LOOM_DETERMINISTIC=1), 4 ranks\n")
    ref = next(iter(det.values()))
    print("| placement | losses identical to the first | parameters sha256 |")
    print("|---|---|---|")
    for label, d in det.items():
        print(f"| {label} | {d['losses'] == ref['losses']} | {d['param_sha256'][:16]} |")
    print("\n## Checkpoint across backends (2 ranks, saved at step " + half + ")\n")
    print("| saved by | resumed by | max abs loss diff vs uninterrupted run of the resuming "
          "backend |")
    print("|---|---|---|")
    for (first, second), d in ck.items():
        full = r[(second, 2)]["losses"][int(half):]
        print(f"| {first} | {second} | {max_diff(d['losses'], full):.3g} |")
    print("\n## DDP step time, 4 ranks (median of 100 steps)\n")
    for b in ("gloo", "loom"):
        print(f"- {b}: {median(r[(b, 4)]['step_seconds']) * 1e3:.1f} ms")
    ok = all(d["losses"] == ref["losses"] and d["param_sha256"] == ref["param_sha256"]
             for d in det.values())
    print("\ndeterministic placements bitwise identical:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
