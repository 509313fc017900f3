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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.atomic_files import write_json_atomically
from streaming.contracts.model import TableContract
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.duckdb_files import register_change_log
from streaming.io.layout import DBT_FOLDER, DUCKDB_FILE, DataLayout
from streaming.io.sinks import SinkName
from streaming.operations.marts_summary import summarize_marts
from streaming.operations.status import StatusReport, status
from streaming.operations.stream import stream
from streaming.runtime.data_lock import LOCK_FILE, hold_data_dir
from streaming.runtime.dbt_runner import check_database_folder, run_dbt_command
from streaming.runtime.startup import load_checked_contracts
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
# The sample's single-table design `app` grows with the sample: one tenant per this many
# customers, and at least one, so every sample holds every contracted table.
CUSTOMERS_PER_TENANT = 10
# The unrouted kinds a summary names, most items first.
KINDS_SHOWN = 5


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
    # Per single-table design: its entities' and its unrouted table's rows.
    single_table: tuple[str, ...]
    marts_summary: str | None


def tenants_for(customers: int) -> int:
    """The app tenants of a sample of `customers` customers."""
    return max(1, customers // CUSTOMERS_PER_TENANT)


def generate(layout: DataLayout, *, customers: int = 200, tenants: int | None = None, out: Printer = print,
             **generator_options: object) -> GenerationSummary:
    """`lakehouse generate`: sample DynamoDB CDC as landing files (streaming.samples.generator),
    the app table's tenants `tenants_for(customers)` unless given."""
    out(f"generating sample CDC into {layout.landing} ...")
    try:
        summary = write_landing_files(layout.landing, customers=customers,
                                      tenants=tenants_for(customers) if tenants is None else tenants,
                                      **generator_options)
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


def single_table_lines(layout: DataLayout, contracts: Mapping[str, TableContract], report: StatusReport) -> list[str]:
    """Per DynamoDB table with entities: each entity's raw table with its change-log and
    current rows, then the unrouted table's, with the kinds of key its items have (the
    text of the routed key up to its first `#`): the entities the contract could declare."""
    lines: list[str] = []
    for table in sorted({contract.table for contract in contracts.values() if contract.is_routed}):
        described = [contract for contract in contracts.values() if contract.table == table]
        entities = [contract for contract in described if not contract.unrouted]
        rows = [(contract.entity, contract.raw_table) for contract in entities]
        rows += [("(unrouted)", contract.raw_table) for contract in described if contract.unrouted]
        name_width = max(len("entity"), *(len(entity) for entity, _ in rows))
        table_width = max(len("raw table"), *(len(raw_table) for _, raw_table in rows))
        lines.append(f"{table}: a single-table design, {len(entities)} entities; items matching none are unrouted")
        lines.append(f"  {'entity':<{name_width}}  {'raw table':<{table_width}}  {'change log':>10}  {'current':>8}")
        for entity, raw_table in rows:
            lines.append(f"  {entity:<{name_width}}  {raw_table:<{table_width}}  "
                         f"{report.change_rows.get(raw_table, 0):>10}  {report.current_rows.get(raw_table, 0):>8}")
        for contract in described:
            kinds = _unrouted_kinds(layout.active(), contract, entities) if contract.unrouted else None
            if kinds:
                lines.append(f"  unrouted items by kind: {kinds} (an entity declared in {table}'s contract "
                             "routes its kind)")
    return lines


def _unrouted_kinds(layout: DataLayout, unrouted: TableContract, entities: list[TableContract]) -> str | None:
    """`AUDIT# 120, APIKEY# 9`: the unrouted table's distinct items per prefix of the key
    its entities route on (the sort key when any route reads it), most first; None when
    nothing is unrouted or that key is not text."""
    import duckdb

    routes_on_sort_key = any(entity.route is not None and entity.route.sort_key_prefix is not None
                             for entity in entities)
    key = unrouted.sort_key if routes_on_sort_key and unrouted.sort_key else unrouted.partition_key
    if unrouted.attribute(key).type != "S":
        return None
    key_column = unrouted.attribute(key).column
    keys = ", ".join(f'"{column}"' for column in unrouted.key_columns)
    with duckdb.connect() as connection:
        if not register_change_log(connection, "unrouted_changes", raw_layout.change_log_dir(layout.raw, unrouted)):
            return None
        counted = connection.execute(
            f"""
            select kind, count(*) as items from (
                select distinct {keys}, coalesce(regexp_extract("{key_column}", '^[^#]*#'), '') as kind
                from unrouted_changes
            )
            group by kind order by items desc, kind limit {KINDS_SHOWN + 1}
            """
        ).fetchall()
    shown = ", ".join(f"{kind or '(no #)'} {items}" for kind, items in counted[:KINDS_SHOWN])
    return shown + (", ..." if len(counted) > KINDS_SHOWN else "")


def run_demo(
    layout: DataLayout,
    *,
    seed: int = 7,
    customers: int = 200,
    tenants: int | None = None,
    record_format: str = "mixed",
    sink: SinkName | None = None,
    contracts_dir: str | None = None,
    build_marts: bool = True,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> DemoResult:
    """`lakehouse demo`: fresh sample data -> stream (available-now) -> counts (per raw
    table, and per entity of each single-table design) -> dbt build -> mart summary, under
    the data directory's lock throughout."""
    if build_marts:
        # Before anything is written: a folder dbt's database cannot live in.
        check_database_folder(layout.root.resolve())
    with hold_data_dir(layout.root, "demo", report=out):
        steps = 4 if build_marts else 3
        done = prepare_demo_dir(layout.root)
        try:
            out(f"[1/{steps}] fresh data directory {layout.root} ({done})")
            generation = generate(layout, seed=seed, customers=customers, tenants=tenants,
                                  record_format=record_format, out=out)
            out(f"[2/{steps}] streaming landing files into the raw tables")
            stream(layout, sink=sink, contracts_dir=contracts_dir, spark=spark, out=out)
            out(f"[3/{steps}] raw tables and quarantine")
            report = status(layout, contracts_dir=contracts_dir)
            for line in report.lines():
                out(line)
            for line in report.commit_lines():
                out(line)
            single_table = tuple(single_table_lines(layout, load_checked_contracts(contracts_dir), report))
            for line in single_table:
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
    return DemoResult(generation, report, single_table, marts_summary)
