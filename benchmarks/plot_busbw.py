#!/usr/bin/env python3
"""Draws bus bandwidth vs message size, one line per transport, from loom-perf --json files.

    loomrun -n 4 loom-perf allreduce -b 8 -e 256M --compare-transports ofi,tcp,shm --json r.json
    python3 benchmarks/plot_busbw.py r.json busbw.svg      # or busbw.png (needs matplotlib)

Several JSON files may be given (their runs are all drawn; labels get the file name when two
runs share a transport). SVG output needs nothing beyond Python; PNG uses matplotlib
(Debian: python3-matplotlib) when it is installed.
"""
import json
import math
import os
import sys


def load_series(paths):
    series = []  # (label, [(bytes, busbw)])
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for run in doc["runs"]:
            pts = []
            for row in run["rows"]:
                half = row["out_of_place"] or row["in_place"]
                if half and row["bytes"] > 0:
                    pts.append((row["bytes"], half["busbw_gbs"]))
            label = f'{run["transport"]} ({doc["collective"]}, {doc["nranks"]} ranks)'
            series.append((label, path, sorted(pts)))
    labels = [s[0] for s in series]
    return [(f"{l} [{os.path.basename(p)}]" if labels.count(l) > 1 else l, pts)
            for l, p, pts in series]


def size_label(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            return f"{b // scale}{unit}"
    return str(b)


def write_svg(series, out):
    w, h, left, right, top, bottom = 900, 520, 70, 220, 30, 50
    xs = [p[0] for _, pts in series for p in pts]
    ys = [p[1] for _, pts in series for p in pts]
    if not xs:
        sys.exit("plot_busbw: no rows with a size > 0")
    x0, x1 = math.log2(min(xs)), math.log2(max(xs)) if max(xs) > min(xs) else math.log2(min(xs)) + 1
    y1 = max(ys) * 1.1 or 1.0
    px = lambda b: left + (math.log2(b) - x0) / (x1 - x0) * (w - left - right)
    py = lambda v: h - bottom - v / y1 * (h - top - bottom)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<line x1="{left}" y1="{h-bottom}" x2="{w-right}" y2="{h-bottom}" stroke="black"/>',
         f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h-bottom}" stroke="black"/>',
         f'<text x="{(w-right+left)/2}" y="{h-10}" text-anchor="middle">message size (bytes)</text>',
         f'<text x="15" y="{(h)/2}" transform="rotate(-90 15 {h/2})" text-anchor="middle">busbw (GB/s)</text>']
    for e in range(int(math.ceil(x0)), int(x1) + 1, 2):
        x = px(2 ** e)
        o.append(f'<line x1="{x:.1f}" y1="{h-bottom}" x2="{x:.1f}" y2="{h-bottom+5}" stroke="black"/>')
        o.append(f'<text x="{x:.1f}" y="{h-bottom+18}" text-anchor="middle">{size_label(2 ** e)}</text>')
    for i in range(6):
        v = y1 * i / 5
        o.append(f'<line x1="{left}" y1="{py(v):.1f}" x2="{w-right}" y2="{py(v):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left-6}" y="{py(v)+4:.1f}" text-anchor="end">{v:.2f}</text>')
    for k, (label, pts) in enumerate(series):
        c = colors[k % len(colors)]
        path = " ".join(f"{px(b):.1f},{py(v):.1f}" for b, v in pts)
        o.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        ly = top + 20 * k + 10
        o.append(f'<line x1="{w-right+10}" y1="{ly}" x2="{w-right+30}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{w-right+35}" y="{ly+4}">{label}</text>')
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


def write_png(series, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_busbw: PNG output needs matplotlib (apt install python3-matplotlib); "
                 "write an .svg instead")
    fig, ax = plt.subplots(figsize=(9, 5))
    for label, pts in series:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    *inputs, out = sys.argv[1:]
    series = load_series(inputs)
    (write_png if out.endswith(".png") else write_svg)(series, out)
    print(f"plot_busbw: wrote {out}")


if __name__ == "__main__":
    main()
