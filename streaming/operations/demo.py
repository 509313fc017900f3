"""`lakehouse demo` and `lakehouse generate`; the demo clears only a directory it made itself.

`LAKEHOUSE_DATA_DIR` may name real data (docs/dbt.md exports it for plain dbt runs), so
"start from scratch" must never mean "delete whatever is there". The demo writes a marker
file into a directory it creates; a later demo clears a directory only when that marker
is there, and refuses a non-empty directory without it.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.errors import OperatorError
from streaming.io.layout import DataLayout
from streaming.io.sinks import SinkName
from streaming.operations.marts_summary import summarize_marts
from streaming.operations.status import StatusReport, status
from streaming.operations.stream import stream
from streaming.runtime.data_lock import LOCK_FILE, hold_data_dir
from streaming.runtime.dbt_runner import run_dbt_command
from streaming.samples.generator import GenerationSummary, write_landing_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Printer = Callable[[str], None]

DEMO_MARKER = ".lakehouse-demo"


class DemoDirRefused(OperatorError):
    """The directory holds data the demo did not create."""


def prepare_demo_dir(root: Path) -> str:
    """Make `root` an empty demo directory; says what it did ("created" or "cleared").

    Clearing removes everything but the marker and the lock file (the caller holds the
    lock): landing, raw, checkpoints, quarantine, backfills, the switch pointer, dbt's
    DuckDB file and its target, so a second demo with another seed shares nothing with
    the first. A root switched elsewhere keeps its data: only the pointer goes.
    """
    entries = [entry for entry in root.iterdir() if entry.name != LOCK_FILE] if root.is_dir() else []
    if not entries:
        root.mkdir(parents=True, exist_ok=True)
        (root / DEMO_MARKER).write_text("made by `lakehouse demo`; a later demo may clear this directory\n")
        return "created"
    if not (root / DEMO_MARKER).is_file():
        raise DemoDirRefused(
            f"{root} is not empty and was not made by `lakehouse demo`; the demo clears only a directory "
            "it created itself. Give it a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    for entry in entries:
        if entry.name == DEMO_MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return "cleared"


@dataclass(frozen=True)
class DemoResult:
    generation: GenerationSummary
    status: StatusReport
    marts_summary: str | None


def generate(layout: DataLayout, *, out: Printer = print, **generator_options: object) -> GenerationSummary:
    """`lakehouse generate`: sample DynamoDB CDC as landing files (streaming.samples.generator)."""
    out(f"generating sample CDC into {layout.landing} ...")
    try:
        summary = write_landing_files(layout.landing, **generator_options)
    except ValueError as exc:
        raise OperatorError(str(exc)) from exc
    events = ", ".join(
        f"{table}: " + " ".join(f"{name}={count}" for name, count in sorted(names.items()))
        for table, names in summary.events.items()
    )
    out(
        f"wrote {summary.records} records in {len(summary.files)} files "
        f"({events}; {summary.duplicates} re-delivered duplicates, {summary.malformed} malformed)"
    )
    return summary


def run_demo(
    layout: DataLayout,
    *,
    seed: int = 7,
    customers: int = 200,
    record_format: str = "mixed",
    sink: SinkName = "auto",
    contracts_dir: str | None = None,
    build_marts: bool = True,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> DemoResult:
    """`lakehouse demo`: fresh sample data -> stream (available-now) -> counts -> dbt build
    -> mart summary, under the data directory's lock throughout."""
    with hold_data_dir(layout.root, "demo", report=out):
        steps = 4 if build_marts else 3
        done = prepare_demo_dir(layout.root)
        out(f"[1/{steps}] fresh data directory {layout.root} ({done})")
        generation = generate(layout, seed=seed, customers=customers, record_format=record_format, out=out)
        out(f"[2/{steps}] streaming landing files into the raw tables")
        stream(layout, sink=sink, contracts_dir=contracts_dir, spark=spark, out=out)
        out(f"[3/{steps}] raw tables and quarantine")
        report = status(layout, contracts_dir=contracts_dir)
        for line in report.lines():
            out(line)
        marts_summary = None
        if build_marts:
            out(f"[4/{steps}] dbt build on the local DuckDB target (staging -> intermediate -> marts, with tests)")
            run_dbt_command(layout.root, ["build"])
            marts_summary = summarize_marts(layout.root)
            out(marts_summary)
            out("documentation of these tables (descriptions, columns, lineage): run `lakehouse docs` "
                "and open http://127.0.0.1:8080/; `select * from lakehouse_marts.mart_freshness` shows how "
                "current each is")
    return DemoResult(generation, report, marts_summary)
