"""Compares run_dist_suite.py results: pass/skip/fail counts per backend and world size, and
every test that passes with gloo but not with loom, grouped by cause.

    python3 tests/torch/compare_dist_suite.py DIR   (reads DIR/{gloo,loom}-{2,3}.json)
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

# First matching pattern names the cause of a loom failure or skip.
CAUSES = [
    (r"loom does not support (send|recv|recv \(any source\))", "send/recv"),
    (r"loom does not support (all_to_all_single|all_to_all)", "all-to-all"),
    (r"loom does not support (gather|scatter)", "gather/scatter"),
    (r"loom does not support ReduceOp\.(BAND|BOR|BXOR)", "bitwise ReduceOps"),
    (r"loom does not support ReduceOp\.PREMUL_SUM", "PREMUL_SUM"),
    (r"loom cannot reduce tensors of dtype", "dtype loom cannot reduce"),
    (r"does not support monitoredBarrier", "monitored_barrier (gloo-only in c10d)"),
    (r"Only gloo backend|[Oo]nly (the )?[Gg]loo|requires backend .*gloo|BACKEND != \"gloo\"",
     "suite runs it for gloo only (by name)"),
    (r"Test requires backend|get_future is only supported on|GLOO Batch Send Recv CPU",
     "suite gates it on a backend name"),
    (r"cannot receive from any source", "recv from any source (loom names the peer, by design)"),
    (r"'custom' != 'loom'", "DDP logging: torch names third-party backends 'custom'"),
    (r"timed out|Timeout", "timeout"),
]


def cause_of(detail: str) -> str:
    for pattern, cause in CAUSES:
        if re.search(pattern, detail):
            return cause
    line = next((l for l in reversed(detail.strip().splitlines()) if l.strip()), "")
    return "other: " + line[:160]


def main():
    d = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    runs = {}
    for f in sorted(d.glob("*-[0-9].json")):
        r = json.loads(f.read_text())
        runs[(r["backend"], r["world_size"])] = r
    print("| backend | ranks | passed | skipped | failed | minutes |")
    print("|---|---|---|---|---|---|")
    for (b, ws), r in sorted(runs.items()):
        c = r["counts"]
        print(f"| {b} | {ws} | {c['pass']} | {c['skip']} | {c['fail']} | {r['seconds'] / 60:.0f} |")
    for ws in sorted({ws for _, ws in runs}):
        gloo, loom = runs.get(("gloo", ws)), runs.get(("loom", ws))
        if not gloo or not loom:
            continue
        by_cause = defaultdict(list)
        for name, g in sorted(gloo["tests"].items()):
            if g["outcome"] != "pass":
                continue
            l = loom["tests"].get(name, {"outcome": "missing", "detail": "not run"})
            if l["outcome"] != "pass":
                by_cause[cause_of(l["detail"])].append(f"{name} ({l['outcome']})")
        total = sum(len(v) for v in by_cause.values())
        print(f"\n{ws} ranks: {total} tests pass with gloo but not with loom")
        for cause, names in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
            print(f"- {cause}: {len(names)}")
            for n in names:
                print(f"    {n}")
        extra = [n for n, l in loom["tests"].items()
                 if l["outcome"] == "pass" and gloo["tests"].get(n, {}).get("outcome") != "pass"]
        if extra:
            print(f"{ws} ranks: {len(extra)} tests pass with loom but not with gloo: "
                  + ", ".join(sorted(extra)))


if __name__ == "__main__":
    main()
