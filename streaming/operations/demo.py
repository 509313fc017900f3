"""`lakehouse demo` and `lakehouse generate`; the demo clears only what it wrote itself.

`LAKEHOUSE_DATA_DIR` may name real data (docs/dbt.md exports it for plain dbt runs), so
"start from scratch" must never mean "delete whatever is there". The demo writes a marker
file into a directory it creates, and when it ends the marker lists every file the demo
left there (with size and modification time) and every table and view in dbt's DuckDB
database. A later demo clears the directory only when each file in it is one the marker
lists, unchanged, or one dbt rewrites (its target and logs, its database), and the
database holds only relations the marker lists or dbt's last manifest names: a directory
without the marker, with files the demo did not write (real landing files, backfill and
replay records, a PII key put in place by hand, an analysis under `dbt/`), or with a
table an analyst made in the database, is refused.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.atomic_files import write_json_atomically
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.contracts.model import TableContract
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.formats.registry import register_change_log
from streaming.io.layout import ATHENA_LOCAL_FOLDER, DEMO_MARKER, LOCK_FILE, DataLayout
from streaming.io.sinks import SinkName
from streaming.operations.marts_summary import summarize_marts
from streaming.operations.status import StatusReport, status
from streaming.operations.stream import stream
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.dbt_runner import check_database_folder, run_dbt_command
from streaming.runtime.startup import load_checked_contracts
from streaming.samples.generator import GenerationSummary, write_landing_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Printer = Callable[[str], None]

# What a dbt run in the data directory rewrites: `lakehouse dbt build` or `lakehouse docs`
# after a demo may change them, so a later demo clears them without their being listed.
# Not all of `dbt/`: nothing but dbt writes there, but a person may. The database is
# checked relation by relation instead (`_relations_not_made_by_demo_or_dbt`).
_EXAMPLE = DataLayout(Path("."))
REWRITTEN_BY_DBT_FOLDERS = (_EXAMPLE.dbt_target.as_posix(), _EXAMPLE.dbt_logs.as_posix())
REWRITTEN_BY_DBT_FILES = (_EXAMPLE.dbt_database.as_posix(), f"{_EXAMPLE.dbt_database.as_posix()}.wal")
# The dbt nodes whose relations a dbt run makes in the database.
_DBT_RELATION_NODES = ("model", "seed", "snapshot")
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


def _rewritten_by_dbt(name: str) -> bool:
    return name in REWRITTEN_BY_DBT_FILES or name.startswith(tuple(f"{folder}/" for folder in REWRITTEN_BY_DBT_FOLDERS))


def _relations_in(database: Path) -> list[str]:
    """`schema.name` of every table and view in the DuckDB file (none when it is missing)."""
    import duckdb

    if not database.is_file():
        return []
    try:
        with duckdb.connect(str(database), read_only=True) as connection:
            rows = connection.execute(
                "select schema_name, table_name from duckdb_tables() where database_name = current_database() "
                "union all select schema_name, view_name from duckdb_views() "
                "where not internal and database_name = current_database()"
            ).fetchall()
    except duckdb.Error as exc:
        raise DemoDirRefused(
            f"cannot read {database} to check that it holds only tables the demo or dbt made ({exc}); "
            "stop whatever uses it, or move it away, and run the demo again"
        ) from exc
    return sorted(f"{schema}.{name}" for schema, name in rows)


def _relations_of_dbt_manifest(layout: DataLayout) -> set[str]:
    """`schema.name` of the relations dbt's last run in this directory knows: its models,
    seeds and snapshots, and its sources (views on DuckDB)."""
    try:
        manifest = json.loads(layout.dbt_manifest.read_text(encoding="utf-8"))
        nodes: Iterable[dict] = [node for node in manifest["nodes"].values()
                                 if node.get("resource_type") in _DBT_RELATION_NODES]
        sources: Iterable[dict] = manifest["sources"].values()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()
    return ({f"{node['schema']}.{node.get('alias') or node['name']}" for node in nodes}
            | {f"{source['schema']}.{source.get('identifier') or source['name']}" for source in sources})


def record_demo_output(root: Path) -> None:
    """Write the marker listing every file now in `root`, and every relation in dbt's
    database, as the demo's own."""
    document = {"made_by": "lakehouse demo; a later demo may clear the files listed here",
                "files": _files_below(root), "relations": _relations_in(DataLayout(root).dbt_database)}
    write_json_atomically(DataLayout(root).demo_marker, document, indent=0)


def _marker(root: Path) -> dict:
    """The marker's content; a marker from before the demo listed its output lists nothing."""
    try:
        document = json.loads(DataLayout(root).demo_marker.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _not_written_by_demo(root: Path, marker: dict) -> list[str]:
    """The files in `root` that the marker does not list as they are now (what dbt
    rewrites aside)."""
    listed = marker.get("files")
    listed = listed if isinstance(listed, dict) else {}
    return sorted(name for name, stamp in _files_below(root).items()
                  if not _rewritten_by_dbt(name) and listed.get(name) != stamp)


def _relations_not_made_by_demo_or_dbt(root: Path, marker: dict) -> list[str]:
    """The tables and views in dbt's database that neither the marker nor dbt's manifest names."""
    layout = DataLayout(root)
    known = set(marker.get("relations") or ()) | _relations_of_dbt_manifest(layout)
    return [name for name in _relations_in(layout.dbt_database) if name not in known]


def prepare_demo_dir(root: Path) -> str:
    """Make `root` an empty demo directory; says what it did ("created" or "cleared").

    Clearing removes everything but the lock file (the caller holds the lock): landing,
    raw, checkpoints, quarantine, dbt's DuckDB file and its target, so a second demo with
    another seed shares nothing with the first. It is refused unless every file is one
    the marker lists as the demo's (or one dbt rewrites), and every relation in dbt's
    database one the marker lists or dbt's manifest names. A root switched elsewhere
    keeps its data: only the pointer goes.
    """
    entries = [entry for entry in root.iterdir() if entry.name != LOCK_FILE] if root.is_dir() else []
    if not entries:
        root.mkdir(parents=True, exist_ok=True)
        record_demo_output(root)
        return "created"
    if (root / ATHENA_LOCAL_FOLDER).exists():
        raise DemoDirRefused(
            f"{root} holds the local Athena ({ATHENA_LOCAL_FOLDER}/: its catalog, state and logs), which clearing "
            "the directory would delete: run the demo in another folder with --data-dir, or land and stream here "
            "(`lakehouse generate`, then `lakehouse stream --catalog thrift://...`, the address `make athena-local` printed)"
        )
    if not DataLayout(root).demo_marker.is_file():
        raise DemoDirRefused(
            f"{root} is not empty and was not made by `lakehouse demo`; the demo clears only a directory "
            "it created itself. Give it a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    marker = _marker(root)
    unexpected = _not_written_by_demo(root, marker)
    if unexpected:
        raise DemoDirRefused(
            f"{root} was made by `lakehouse demo`, but holds files the demo did not write (or that changed "
            f"since): {_named(unexpected)}. The demo clears only its own files: move "
            "these away, or give the demo a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    foreign = _relations_not_made_by_demo_or_dbt(root, marker)
    if foreign:
        raise DemoDirRefused(
            f"{root} was made by `lakehouse demo`, but its database {DataLayout(root).dbt_database.name} holds "
            f"tables or views neither the demo nor dbt made: {_named(foreign)}. The demo would delete the "
            "database: copy them elsewhere (e.g. `attach 'mine.duckdb'; create table mine.t as from t`) and drop "
            "them, or give the demo a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
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


def _named(names: list[str]) -> str:
    more = f" and {len(names) - NAMED_AT_MOST} more" if len(names) > NAMED_AT_MOST else ""
    return f"{', '.join(names[:NAMED_AT_MOST])}{more}"


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
    the data directory's lock throughout. The sample tables' contracts (the generator
    writes their changes), whatever contracts of their own the user has, unless
    `contracts_dir` names others; dbt builds the sample tables' models."""
    contracts_dir = str(SAMPLE_CONTRACTS_DIR) if contracts_dir is None else contracts_dir
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
                run_dbt_command(layout.root, ["build"], contracts_dir=SAMPLE_CONTRACTS_DIR)
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
