#!/usr/bin/env python3
"""bench/peers report: medians, ratios, CSV and a PNG bar chart from the run rows.

Reads the rows "system,workload,metric,unit,run,value" that peers_bench.cc and
dask_bench.py wrote, prints the side-by-side table, and writes into --out:
  peers.csv   one line per (workload, metric, system): median, min, max, runs
  peers.png   one panel per workload, bars at the median, whiskers min..max
  table.txt   the table as printed
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys

SYSTEMS = [("hmpmd", "HyperMPMD"), ("dask", "Dask"), ("raw", "raw ZeroMQ")]
COLOURS = {"hmpmd": "#1f77b4", "dask": "#ff7f0e", "raw": "#7f7f7f"}


def nominal_lower_bound_ms(path, slots):
    """max(sum of each step's critical path, all work / slots) from the spec's spin durations."""
    with open(path) as f:
        spec = json.load(f)
    us = {t["id"]: float(t["args"]["us"]) for t in spec["tasks"]}
    finish = {}
    for t in spec["tasks"]:  # inputs come before their users
        finish[t["id"]] = us[t["id"]] + max((finish[i] for i in t.get("inputs", [])), default=0.0)
    repeat = int(spec.get("repeat", 1))
    cp = max(finish.values()) * repeat
    work = sum(us.values()) * repeat / slots
    return max(cp, work) / 1e3, len(spec["tasks"]) * repeat


def load_rows(path):
    data = {}
    with open(path) as f:
        for n, rec in enumerate(csv.reader(f), 1):
            if not rec:
                continue
            if len(rec) != 6:
                sys.exit(f"report: {path}:{n}: expected 6 fields, got {len(rec)}")
            system, workload, metric, unit, _, value = rec
            data.setdefault((workload, metric), {"unit": unit, "by": {}})["by"].setdefault(system, []).append(float(value))
    return data


def stats(values):
    return statistics.median(values), min(values), max(values), len(values)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows", help="CSV rows from the two benchmark halves")
    p.add_argument("--out", required=True, help="results folder")
    p.add_argument("--independent", type=int, required=True)
    p.add_argument("--chain", type=int, required=True)
    p.add_argument("--leaves", type=int, required=True)
    p.add_argument("--fan-in", type=int, required=True)
    p.add_argument("--multimodal", required=True)
    p.add_argument("--machine", default="", help="one line saying where it ran")
    a = p.parse_args()

    data = load_rows(a.rows)
    lb_nominal, mm_tasks = nominal_lower_bound_ms(a.multimodal, slots=2)
    labels = {
        ("w1_independent", "tasks_per_s"): f"1 {a.independent} independent noop tasks",
        ("w2_chain", "latency_us"): f"2 chain of {a.chain} noop tasks",
        ("w3_tree", "makespan_ms"): f"3 tree, {a.leaves} leaves, fan-in {a.fan_in}",
        ("w4_multimodal", "makespan_ms"): f"4 multimodal spin ({mm_tasks} tasks), makespan",
        ("w4_multimodal", "lower_bound_ms"): "  lower bound, HyperMPMD's recorded runs",
    }

    def cell(key, system):
        entry = data.get(key, {"by": {}})["by"].get(system)
        if not entry:
            return "-", None
        med, lo, hi, _ = stats(entry)
        fmt = "{:.0f}" if med >= 1000 else "{:.1f}" if med >= 10 else "{:.2f}"
        return f"{fmt.format(med)} [{fmt.format(lo)}..{fmt.format(hi)}]", med

    lines = []
    runs = max((len(v) for d in data.values() for v in d["by"].values()), default=0)
    lines.append(f"bench/peers: median of {runs} run(s) [min..max]; 2 workers x 1 slot each, loopback")
    if a.machine:
        lines.append(f"machine: {a.machine}")
    head = f"{'workload':47} {'unit':8} {'HyperMPMD':>24} {'Dask':>24} {'raw ZeroMQ':>24} {'HMPMD/Dask':>11} {'HMPMD/raw':>10}"
    lines.append(head)
    lines.append("-" * len(head))
    summary = []
    medians = {}
    for key, label in labels.items():
        if key not in data:
            continue
        unit = data[key]["unit"]
        cells = {s: cell(key, s) for s, _ in SYSTEMS}
        for s, _ in SYSTEMS:
            if cells[s][1] is not None:
                medians[(key, s)] = cells[s][1]
                med, lo, hi, n = stats(data[key]["by"][s])
                summary.append([key[0], key[1], unit, s, f"{med:.6g}", f"{lo:.6g}", f"{hi:.6g}", n])
        h = cells["hmpmd"][1]
        r_dask = f"{h / cells['dask'][1]:.3g}" if h and cells["dask"][1] else "-"
        r_raw = f"{h / cells['raw'][1]:.3g}" if h and cells["raw"][1] else "-"
        lines.append(f"{label:47} {unit:8} {cells['hmpmd'][0]:>24} {cells['dask'][0]:>24} {cells['raw'][0]:>24} {r_dask:>11} {r_raw:>10}")
    lines.append(f"{'  lower bound, nominal spin durations, 2 slots':47} {'ms':8} {lb_nominal:>24.1f}")
    summary.append(["w4_multimodal", "nominal_lower_bound_ms", "ms", "spec", f"{lb_nominal:.6g}", f"{lb_nominal:.6g}", f"{lb_nominal:.6g}", 1])

    lines.append("")
    lines.append("targets:")

    def target(text, ok):
        lines.append(f"  [{'met' if ok else 'MISSED'}] {text}")

    k1, k2, k4 = ("w1_independent", "tasks_per_s"), ("w2_chain", "latency_us"), ("w4_multimodal", "makespan_ms")
    if (k1, "hmpmd") in medians and (k1, "dask") in medians:
        x = medians[(k1, "hmpmd")] / medians[(k1, "dask")]
        target(f"workload 1: HyperMPMD tasks/s >= 20x Dask's: {x:.1f}x", x >= 20)
    if (k2, "hmpmd") in medians and (k2, "dask") in medians:
        x = medians[(k2, "dask")] / medians[(k2, "hmpmd")]
        target(f"workload 2: per-task latency >= 10x lower than Dask's: {x:.1f}x lower", x >= 10)
    if (k4, "hmpmd") in medians:
        lb = medians.get((("w4_multimodal", "lower_bound_ms"), "hmpmd"), lb_nominal)
        x = medians[(k4, "hmpmd")] / lb
        target(f"workload 4: HyperMPMD makespan within 10% of its lower bound: {x:.2f}x the bound "
               f"({x * lb / lb_nominal:.2f}x the nominal one)", x <= 1.10)
        if (k4, "dask") in medians:
            lines.append(f"  (Dask's workload 4 makespan is {medians[(k4, 'dask')] / lb_nominal:.2f}x the nominal bound)")

    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "peers.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "metric", "unit", "system", "median", "min", "max", "runs"])
        w.writerows(summary)
    plot(a, data, labels, lb_nominal)


def plot(a, data, labels, lb_nominal):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in [("w1_independent", "tasks_per_s"), ("w2_chain", "latency_us"),
                          ("w3_tree", "makespan_ms"), ("w4_multimodal", "makespan_ms")] if k in data]
    titles = {"tasks_per_s": "tasks/s (higher is better)", "latency_us": "us per task (lower is better)",
              "makespan_ms": "makespan, ms (lower is better)"}
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4.2), squeeze=False)
    for ax, key in zip(axes[0], panels):
        names, meds, errs, cols = [], [], [[], []], []
        for s, name in SYSTEMS:
            v = data[key]["by"].get(s)
            if not v:
                continue
            med, lo, hi, _ = stats(v)
            names.append(name)
            meds.append(med)
            errs[0].append(med - lo)
            errs[1].append(hi - med)
            cols.append(COLOURS[s])
        ax.bar(names, meds, yerr=errs, color=cols, capsize=4)
        for i, m in enumerate(meds):
            ax.annotate(f"{m:.3g}", (i, m), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 3), textcoords="offset points")
        if key[0] == "w4_multimodal":
            ax.axhline(lb_nominal, color="black", linestyle="--", linewidth=1)
            ax.annotate("lower bound", (0.98, lb_nominal), xycoords=("axes fraction", "data"),
                        ha="right", va="bottom", fontsize=8)
        if len(meds) > 1 and max(meds) / min(meds) > 30:
            ax.set_yscale("log")
        ax.set_title(re.sub(r"^\d ", "", labels[key]).split(", makespan")[0], fontsize=9)
        ax.set_ylabel(titles[key[1]], fontsize=9)
    fig.suptitle("bench/peers: median of runs, whiskers min..max (2 workers x 1 slot)", fontsize=10)
    if a.machine:
        fig.text(0.5, 0.01, a.machine, ha="center", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.04 if a.machine else 0, 1, 1))
    fig.savefig(os.path.join(a.out, "peers.png"), dpi=110)


if __name__ == "__main__":
    main()
