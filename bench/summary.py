#!/usr/bin/env python3
"""Summarises a bench's rounds file: per case and reference, the median of
the per-round ratios with its interquartile range and full range, and a
verdict against the target.

    summary.py ROUNDS.tsv TARGETS JUDGE

ROUNDS.tsv has the columns round, case, reference, benchlab, other, ratio,
better (higher|lower). TARGETS is a comma-separated list of
reference=bound ("limit=0.99,iperf3=1.00"): for "higher" cases the median
ratio must be at least the bound, for "lower" cases at most 2 − bound (a
0.99 throughput target is a 1.01 latency target). JUDGE 0 prints the
figures with no verdict (the machine was loaded at the start). Exit status:
0 when every target is met (or nothing was judged), 1 otherwise.
"""
import csv
import statistics
import sys


def quartiles(xs):
    """Q1 and Q3 by the inclusive method (the median of each half's
    order statistics, as statistics.quantiles(method='inclusive'))."""
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    targets = dict(
        (k, float(v)) for k, v in (t.split("=") for t in sys.argv[2].split(",") if t)
    )
    judge = sys.argv[3] == "1"
    keys = []
    for r in rows:
        k = (r["case"], r["reference"])
        if k not in keys:
            keys.append(k)
    print("\nper case: benchlab / reference, median of the per-round ratios [IQR] (min-max), n rounds")
    ok = True
    for k in keys:
        rs = [r for r in rows if (r["case"], r["reference"]) == k]
        ratios = sorted(float(r["ratio"]) for r in rs)
        med = statistics.median(ratios)
        q1, q3 = quartiles(ratios)
        b = statistics.median(float(r["benchlab"]) for r in rs)
        o = statistics.median(float(r["other"]) for r in rs)
        higher = rs[0]["better"] == "higher"
        verdict = ""
        bound = targets.get(k[1])
        if bound is not None:
            if higher:
                met, want = med >= bound, f">= {bound:.2f}"
            else:
                met, want = med <= 2 - bound, f"<= {2 - bound:.2f}"
            if judge:
                ok &= met
                verdict = f"target {want}: {'PASS' if met else 'MISS'}"
            else:
                verdict = f"target {want}: no verdict (load)"
        print(
            f"  {k[0]:<34} / {k[1]:<8} {med:6.3f} [{q1:.3f}-{q3:.3f}] ({ratios[0]:.3f}-{ratios[-1]:.3f}) n={len(ratios)}"
            f"  benchlab {b:.4g} ref {o:.4g}  {verdict}"
        )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
