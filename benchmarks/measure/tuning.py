#!/usr/bin/env python3
"""LOOM_TUNING for this machine from `loom-perf --calibrate` runs at 2 and 8 ranks.

  tuning.py CORES CAL2_FILE... -- CAL8_FILE...   prints k=v,k=v (each constant's median)

The 2-rank runs give the link and reduction constants. With 8 ranks on fewer CPUs the 8-rank
runs give the oversubscribed host's copy curve, the extra latency per message (the difference
of the two calibrations' alpha, per extra rank on the busiest CPU: the model scales it by
ceil(ranks/cores) - 1) and a rank's turn (a recursive-doubling round at k = 8 / cores ranks per
CPU takes k^2 - 1 turns more than at one per CPU; docs/algorithms.md). Used by
algorithms_selector.sh and sim_validation.sh.
"""
import statistics
import sys


def constants(path):
    lines = open(path).readlines()
    line = [l for l in lines if l.startswith("LOOM_TUNING=")][0].strip()[len("LOOM_TUNING="):]
    out = dict(x.split("=") for x in line.split(","))
    out["round"] = [l for l in lines if l.startswith("# rd_round_us=")][0].split("=")[1].strip()
    return out


def median(values):
    """The median of numbers, or of curves ("bytes:gbps/..."): per size."""
    if ":" not in values[0]:
        return f"{statistics.median(float(v) for v in values):.4g}"
    curves = [dict(p.split(":") for p in v.split("/")) for v in values]
    sizes = [s for s in curves[0] if all(s in c for c in curves)]
    return "/".join(f"{s}:{statistics.median(float(c[s]) for c in curves):.4g}" for s in sizes)


def medians(paths):
    """Each constant's median over the runs that printed it (most of them)."""
    runs = [constants(p) for p in paths]
    keys = [k for k in dict.fromkeys(k for r in runs for k in r)
            if 2 * sum(k in r for r in runs) > len(runs)]
    return {k: median([r[k] for r in runs if k in r]) for k in keys}


def tuning(cores, two, eight):
    busiest = -(-8 // cores)
    extra = (float(eight["intra_alpha_us"]) - float(two["intra_alpha_us"])) / (busiest - 1) \
        if busiest > 1 else 0
    out = dict(two)
    out["oversub_alpha_us"] = f"{max(extra, 0):.3g}"
    if 8 > cores:
        for key in ("oversub_gbps", "oversub_cache_gbps", "oversub_dram_bytes", "oversub_curve"):
            if key in eight:
                out[key] = eight[key]
        turn = (float(eight["round"]) - float(two["round"])) / ((8 / cores) ** 2 - 1)
        out["oversub_turn_us"] = f"{max(turn, 0):.3g}"
    del out["round"]
    return ",".join(f"{k}={v}" for k, v in out.items())


def main():
    cores, files = int(sys.argv[1]), sys.argv[2:]
    cut = files.index("--")
    print(tuning(cores, medians(files[:cut]), medians(files[cut + 1:])))


if __name__ == "__main__":
    main()
