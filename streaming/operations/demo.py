"""`lakehouse demo` and `lakehouse generate`; the demo clears only what it wrote itself.

`LAKEHOUSE_DATA_DIR` may name real data (docs/dbt.md exports it for plain dbt runs), so
"start from scratch" must never mean "delete whatever is there". The demo writes a marker
file into a directory it creates, and when it ends the marker lists every file the demo
left there (with size and modification time). A later demo clears the directory only when
each file in it is one the marker lists, unchanged: a directory without the marker, or
with files the demo did not write (real landing files, backfill and replay records, a PII
key put in place by hand), is refused.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.atomic_files import write_json_atomically
from streaming.errors import OperatorError
from streaming.io.layout import DBT_FOLDER, DUCKDB_FILE, DataLayout
from streaming.io.sinks import SinkName
from streaming.operations.marts_summary import summarize_marts
from streaming.operations.status import StatusReport, status
from streaming.operations.stream import stream
from streaming.runtime.data_lock import LOCK_FILE, hold_data_dir
from streaming.runtime.dbt_runner import check_database_folder, run_dbt_command
from streaming.samples.generator import GenerationSummary, write_landing_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Printer = Callable[[str], None]

DEMO_MARKER = ".lakehouse-demo"
# dbt's database, target and logs are rebuilt from the raw tables by every dbt run, so
# `lakehouse dbt build` or `lakehouse docs` after a demo may change them: a later demo
# clears them without their being listed.
REBUILT_BY_DBT = (DBT_FOLDER, DUCKDB_FILE, f"{DUCKDB_FILE}.wal")
# How many unexpected files a refusal names.
NAMED_AT_MOST = 10


class DemoDirRefused(OperatorError):
    """The directory holds data the demo did not create."""


def _files_below(root: Path) -> dict[str, list[int]]:
    """Every file (and symbolic link) below `root` but the marker and the lock file, by
    its path relative to `root`, with its size and modification time in nanoseconds."""
    found = {}
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if relative.parts[0] in (DEMO_MARKER, LOCK_FILE) or not (path.is_symlink() or path.is_file()):
            continue
        status = path.lstat()
        found[relative.as_posix()] = [status.st_size, status.st_mtime_ns]
    return found


def record_demo_output(root: Path) -> None:
    """Write the marker listing every file now in `root` as the demo's own."""
    document = {"made_by": "lakehouse demo; a later demo may clear the files listed here",
                "files": _files_below(root)}
    write_json_atomically(root / DEMO_MARKER, document, indent=0)


def _not_written_by_demo(root: Path) -> list[str]:
    """The files in `root` that the marker does not list as they are now (files dbt
    rebuilds aside); a marker from before the demo listed its files lists none."""
    try:
        listed = json.loads((root / DEMO_MARKER).read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        listed = {}
    return sorted(
        name for name, stamp in _files_below(root).items()
        if name.split("/", 1)[0] not in REBUILT_BY_DBT and listed.get(name) != stamp
    )


def prepare_demo_dir(root: Path) -> str:
    """Make `root` an empty demo directory; says what it did ("created" or "cleared").

    Clearing removes everything but the lock file (the caller holds the lock): landing,
    raw, checkpoints, quarantine, dbt's DuckDB file and its target, so a second demo with
    another seed shares nothing with the first. It is refused unless every file is one
    the marker lists as the demo's (or one dbt rebuilds). A root switched elsewhere keeps
    its data: only the pointer goes.
    """
    entries = [entry for entry in root.iterdir() if entry.name != LOCK_FILE] if root.is_dir() else []
    if not entries:
        root.mkdir(parents=True, exist_ok=True)
        record_demo_output(root)
        return "created"
    if not (root / DEMO_MARKER).is_file():
        raise DemoDirRefused(
            f"{root} is not empty and was not made by `lakehouse demo`; the demo clears only a directory "
            "it created itself. Give it a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    unexpected = _not_written_by_demo(root)
    if unexpected:
        more = f" and {len(unexpected) - NAMED_AT_MOST} more" if len(unexpected) > NAMED_AT_MOST else ""
        raise DemoDirRefused(
            f"{root} was made by `lakehouse demo`, but holds files the demo did not write (or that changed "
            f"since): {', '.join(unexpected[:NAMED_AT_MOST])}{more}. The demo clears only its own files: move "
            "these away, or give the demo a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    for entry in entries:
        if entry.name == DEMO_MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    # Until this run ends, none of the files that appear are listed as the demo's.
    record_demo_output(root)
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
    if build_marts:
        # Before anything is written: a folder dbt's database cannot live in.
        check_database_folder(layout.root.resolve())
    with hold_data_dir(layout.root, "demo", report=out):
        steps = 4 if build_marts else 3
        done = prepare_demo_dir(layout.root)
        try:
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
        finally:
            # The directory was empty when this run began and it held the lock since, so
            # every file there now is the demo's, also when a step failed.
            record_demo_output(layout.root)
    return DemoResult(generation, report, marts_summary)
