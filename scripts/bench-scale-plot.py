#!/usr/bin/env python3
"""Plot the scale benchmark: server CPU per request and p99 against the
table size (log x axis), one line per workload and backend, from the JSON
reports `extenddb bench scale` writes (scale-BACKEND.json).

    scripts/bench-scale-plot.py OUT.png scale-sqlite.json [scale-postgres.json ...]

Needs matplotlib (scripts/bench-scale.sh installs it into a virtualenv
under $EXTENDDB_CACHE).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = {"sqlite": "-", "postgres": "--"}
MARKERS = {"sqlite": "o", "postgres": "s"}


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out, reports = argv[1], [json.load(open(p)) for p in argv[2:]]
    fig, (ax_cpu, ax_p99) = plt.subplots(1, 2, figsize=(13, 6.5))
    colors = {}
    dates = set()
    for rep in reports:
        be = rep["backend"]
        dates.add(rep["started"][:16].replace("T", " "))
        sizes = rep.get("sizes") or []
        if not sizes:
            continue
        names = list(sizes[0]["workloads"].keys())
        for name in names:
            xs, cpu, p99 = [], [], []
            for s in sizes:
                r = s["workloads"].get(name)
                if not r:
                    continue
                xs.append(s["items"])
                cpu.append((r.get("server") or {}).get("cpu_us_per_op", float("nan")))
                p99.append(r["p99_us"] / 1000)
            c = colors.setdefault(name, f"C{len(colors)}")
            kw = dict(color=c, linestyle=STYLES.get(be, ":"), marker=MARKERS.get(be, "^"), label=f"{name} ({be})")
            ax_cpu.plot(xs, cpu, **kw)
            ax_p99.plot(xs, p99, **kw)
    for ax, title, unit in ((ax_cpu, "server CPU per request", "µs"), (ax_p99, "p99 latency", "ms")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("items in the table")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax_cpu.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    cpus = reports[0].get("cpus")
    conc = reports[0].get("concurrency")
    fig.suptitle(f"extenddb bench scale, {conc} workers, {cpus} CPUs (shared), {', '.join(sorted(dates))} UTC")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
