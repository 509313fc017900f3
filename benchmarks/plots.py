"""Charts of the benchmark and drill results (matplotlib, Agg: no display needed)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)


def _throughput(ax: Any, rows: list[dict[str, Any]]) -> None:
    rows = [row for row in rows if row["master"] == "local[2]"]
    labels = [f"{row['events']:,}" for row in rows]
    positions = range(len(rows))
    formats = sorted({fmt for row in rows for fmt in row["copy_events_per_s"]})
    width = 0.8 / (1 + len(formats))
    ax.bar([p for p in positions], [row["job_events_per_s"] for row in rows], width, label="job")
    for offset, fmt in enumerate(formats, start=1):
        ax.bar([p + offset * width for p in positions], [row["copy_events_per_s"].get(fmt, 0) for row in rows],
               width, label=f"{fmt} copy")
    ax.set_xticks([p + width * len(formats) / 2 for p in positions], labels)
    ax.set_xlabel("events")
    ax.set_ylabel("events/s")
    ax.set_title("throughput, local[2]")
    ax.legend()


def _microbatches(ax: Any, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        ax.plot(range(len(row["batch_seconds"])), row["batch_seconds"], marker=".", label=row["master"])
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("seconds")
    ax.set_title("time per micro-batch (one file each)")
    ax.legend()


def _dbt(ax: Any, dbt: dict[str, Any]) -> None:
    names = ["initial", "incremental (+1%)", "full refresh"]
    values = [dbt["initial_build"]["seconds"], dbt["incremental_build"]["seconds"], dbt["full_refresh_build"]["seconds"]]
    ax.bar(names, values, color=["grey", "tab:green", "tab:orange"])
    ax.set_ylabel("seconds")
    ax.set_title(f"dbt build over {dbt['rows']:,} raw change rows (ratio {dbt['ratio']:.2f})")


def _freshness(ax: Any, fresh: dict[str, Any], memory: dict[str, Any] | None) -> None:
    ax.plot(range(len(fresh["latencies_s"])), fresh["latencies_s"], marker="o", linestyle="none")
    ax.axhline(fresh["p50_s"], linestyle="--", label=f"p50 {fresh['p50_s']:.1f}s")
    ax.axhline(fresh["p95_s"], linestyle=":", label=f"p95 {fresh['p95_s']:.1f}s")
    ax.set_xlabel("landed file")
    ax.set_ylabel("seconds to readable raw rows")
    title = f"freshness, trigger {fresh['trigger_s']}s"
    if memory:
        title += (f"\n(memory run: peak {memory.get('peak_pss_bytes', 0) / 1024**3:.2f} GiB proportional, "
                  f"{memory['peak_rss_bytes'] / 1024**3:.2f} GiB resident, {memory['events']:,} events)")
    ax.set_title(title)
    ax.legend()


def plot_bench(results: dict[str, Any], path: Path) -> None:
    panels = [
        (_throughput, results.get("throughput")),
        (_microbatches, results.get("microbatches")),
        (_dbt, results.get("dbt")),
    ]
    if results.get("freshness"):
        panels.append((lambda ax, fresh: _freshness(ax, fresh, results.get("memory")), results["freshness"]))
    panels = [(draw, data) for draw, data in panels if data]
    if not panels:
        return
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (draw, data) in zip(axes[0], panels):
        draw(ax, data)
    figure.suptitle(f"lakehouse benchmarks ({results['mode']} mode, {results['machine']['nproc']} cores)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_drills(results: dict[str, Any], path: Path) -> None:
    """One row per drill: a pass/fail mark, the checks it ran and its one-line summary."""
    sections = list(results["drills"].items())
    figure, ax = plt.subplots(figsize=(12, 0.55 * len(sections) + 1.2))
    ax.axis("off")
    for row, (name, section) in enumerate(reversed(sections)):
        passed = bool(section.get("passed"))
        ax.text(0.0, row, "PASS" if passed else "FAIL", color="white", fontsize=10, va="center", fontweight="bold",
                bbox={"facecolor": "tab:green" if passed else "tab:red", "edgecolor": "none"})
        ax.text(0.06, row, name, fontsize=10, va="center")
        # The first line only; plain text (an error's `$` would start matplotlib's mathtext).
        detail = (section.get("summary") or section.get("error", "")).strip().split("\n", 1)[0][:200]
        ax.text(0.36, row, f"{section.get('checks', '-')} checks, {section.get('seconds', 0):.0f}s: {detail}", usetex=False,
                parse_math=False,
                fontsize=9, va="center")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.7, len(sections) - 0.3)
    ax.set_title(f"fault drills ({results['mode']} mode)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
