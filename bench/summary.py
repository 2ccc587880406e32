#!/usr/bin/env python3
"""Summarises a bench's rounds file: per case and reference, the median of
the per-round ratios with its interquartile range and full range, and a
verdict against the target.

    summary.py ROUNDS.tsv TARGETS JUDGE

ROUNDS.tsv has the columns round, case, reference, benchlab, other, ratio,
better (higher|lower). Rows whose reference is "repeat" are a tool
against itself in the same round (the limit run twice, "A/A"): they are
not judged, but give each case the machine's resolution, the furthest
the repeat's interquartile range strays from 1. A missed target is then
printed as a miss "within the A/A spread" when the shortfall is no larger
than that resolution (the bench cannot tell it from noise), else as a
plain miss. TARGETS is a comma-separated list of
reference=bound ("limit=0.99,iperf3=1.00"): for "higher" cases the median
ratio must be at least the bound, for "lower" cases at most 2 − bound (a
0.99 throughput target is a 1.01 latency target). JUDGE 0 prints the
figures with no verdict (the machine was loaded at the start). Exit status:
0 when every target is met (or nothing was judged), 1 otherwise (a miss
within the A/A spread counts as a miss: the bound is the target).
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
    # The A/A resolution per case: how far a tool strays from itself.
    resolution = {}
    for case in {r["case"] for r in rows if r["reference"] == "repeat"}:
        aa = sorted(float(r["ratio"]) for r in rows if (r["case"], r["reference"]) == (case, "repeat"))
        q1, q3 = quartiles(aa)
        resolution[case] = max(abs(1 - q1), abs(q3 - 1))
    keys = []
    for r in rows:
        k = (r["case"], r["reference"])
        if k not in keys:
            keys.append(k)
    print("\nper case: benchlab / reference, median of the per-round ratios [IQR] (min-max), n rounds")
    if resolution:
        print("  (repeat: the reference run again in the round, second / first; its IQR's furthest")
        print("   point from 1 is the case's A/A resolution, the smallest shortfall the bench can tell from noise)")
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
        if k[1] == "repeat":
            verdict = f"A/A resolution ±{resolution[k[0]]:.3f}"
        elif bound is not None:
            if higher:
                met, want, short = med >= bound, f">= {bound:.2f}", bound - med
            else:
                met, want, short = med <= 2 - bound, f"<= {2 - bound:.2f}", med - (2 - bound)
            if judge:
                ok &= met
                if met:
                    word = "PASS"
                elif short <= resolution.get(k[0], 0):
                    word = f"MISS by {short:.3f}, within the A/A spread (±{resolution[k[0]]:.3f})"
                else:
                    word = f"MISS by {short:.3f}"
                verdict = f"target {want}: {word}"
            else:
                verdict = f"target {want}: no verdict (load)"
        print(
            f"  {k[0]:<34} / {k[1]:<8} {med:6.3f} [{q1:.3f}-{q3:.3f}] ({ratios[0]:.3f}-{ratios[-1]:.3f}) n={len(ratios)}"
            f"  {'again' if k[1] == 'repeat' else 'benchlab'} {b:.4g} ref {o:.4g}  {verdict}"
        )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
