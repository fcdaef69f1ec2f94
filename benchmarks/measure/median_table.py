#!/usr/bin/env python3
"""Merges several loom-perf tables of the same sweep into one: each numeric column of a row is
the median over the runs (rows and header lines as in the first file). Used by the measurement
scripts, which repeat noisy runs and interleave them.

  median_table.py run1.txt run2.txt run3.txt > median.txt
"""
import statistics
import sys


def rows(path):
    out = {}
    for line in open(path):
        p = line.split()
        if len(p) == 13 and p[0].isdigit():
            out[int(p[0])] = p
    return out


def main():
    files = sys.argv[1:]
    tables = [rows(f) for f in files]
    for line in open(files[0]):
        p = line.split()
        if not (len(p) == 13 and p[0].isdigit()):
            print(line, end="")
            continue
        size = int(p[0])
        merged = list(p)
        for col in range(5, 13):
            vals = []
            for t in tables:
                try:
                    vals.append(float(t[size][col]))
                except (KeyError, ValueError):
                    pass
            if vals:
                merged[col] = f"{statistics.median(vals):.6g}"
        print(" ".join(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
