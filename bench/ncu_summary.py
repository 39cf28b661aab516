#!/usr/bin/env python3
"""Per-kernel GPU time of one forward from an Nsight Compute CSV.

Input: `ncu --csv --page raw --metrics gpu__time_duration.sum` over N forwards
(e.g. the NVTX range of `rlx bench`'s timed graph runs). Kernels are grouped
by name without template arguments (with --by-grid, by name and grid size,
which tells apart the products of one kernel); times are per forward
(total / N). --metrics a,b prints the mean of those other collected
metrics (e.g. dram__throughput.avg.pct_of_peak_sustained_elapsed) over the
group's kernels. --after-last N:REGEX keeps only the rows after the N-th
last kernel whose name matches REGEX (with --forwards N: the last N decode
steps of a run profiled by kernel name, e.g. `--after-last 3:argmax` when
each step ends in the argmax kernel and the run has a step after them).
"""
import argparse
import collections
import csv
import io
import re


def short(name):
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"<.*", "", name)  # template arguments
    name = re.sub(r"\(.*", "", name)  # parameters
    return name.split("::")[-1].strip()[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--forwards", type=int, required=True)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--by-grid", action="store_true")
    ap.add_argument("--metrics", default="", help="comma-separated metrics to average per group")
    ap.add_argument("--after-last", default="", help="N:REGEX: only the rows after the N-th last REGEX kernel")
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{a.csv}: no ncu rows")
        return
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    if a.after_last:
        count, pattern = a.after_last.split(":", 1)
        marks = [i for i, r in enumerate(rows) if re.search(pattern, r.get("Kernel Name", ""))]
        if len(marks) < int(count):
            print(f"{a.csv}: fewer than {count} kernels match {pattern!r}")
            return
        rows = rows[marks[-int(count)] + 1 :]
    by = collections.defaultdict(lambda: [0, 0.0])
    extra = collections.defaultdict(lambda: collections.defaultdict(float))
    names = [m for m in a.metrics.split(",") if m]
    total = 0.0
    for r in rows:
        v = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(v.replace(",", ""))
        except ValueError:
            continue  # the units row
        k = short(r.get("Kernel Name", "?"))
        if a.by_grid:
            k += " grid " + r.get("Grid Size", "?").replace(" ", "")
        by[k][0] += 1
        by[k][1] += ns
        total += ns
        for c in names:
            try:
                extra[k][c] += float(r.get(c, "").replace(",", ""))
            except ValueError:
                pass
    n = a.forwards
    kernels = sum(c for c, _ in by.values())
    print(f"{a.csv.split('/')[-1]}: {kernels / n:.0f} kernels, {total / n / 1e3:.1f} us of kernel time per forward")
    for k, (c, ns) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top]:
        more = "".join(f"  {m.split('.')[0]}={extra[k][m] / c:.4g}" for m in names)
        print(f"  {ns / n / 1e3:8.1f} us  {c / n:5.0f} x  {k}{more}")


if __name__ == "__main__":
    main()
