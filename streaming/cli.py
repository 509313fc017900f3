"""The `lakehouse` console script: generate sample CDC, stream it to raw, inspect, demo,
backfill from DynamoDB exports, reprocess, switch and reconcile, and serve the dbt docs.

Everything lives under one data directory (default `./data`, or `$LAKEHOUSE_DATA_DIR`),
laid out as docs/architecture.md describes. After `lakehouse switch`, the raw tables,
quarantine and checkpoint live in the data root that `<data dir>/active_raw.json` names;
the landing files stay in the data directory.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.contract import ContractError, TableContract, load_contracts
from streaming.data_lock import DataDirLocked, hold_data_dir
from streaming.operations.reprocess import POINTER_FILE, RAW_DIR_ENV, SwitchError, read_pointer
from streaming.spark import DEFAULT_MASTER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.operations.backfill import BackfillResult
    from streaming.operations.generator import GenerationSummary
    from streaming.pipeline import Pipeline
    from streaming.operations.reconcile import ReconcileReport

DATA_DIR_ENV = "LAKEHOUSE_DATA_DIR"
QUERY_NAME = "landing_to_raw"
# `reconcile` exits with this when the two sides differ (2 stays "could not run").
MISMATCH_EXIT_CODE = 1

Printer = Callable[[str], None]


class CliError(Exception):
    """A user-facing problem: printed without a traceback, exit code 2."""


class ReconcileMismatch(Exception):
    """Source and target differ; the report was printed, exit code 1."""


@dataclass(frozen=True)
class DataLayout:
    root: Path

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    def checkpoint(self, query_name: str) -> Path:
        return self.root / "checkpoints" / query_name


@dataclass(frozen=True)
class StatusReport:
    # Per raw table: rows of its change log, rows of its current state (keys, tombstones
    # included), and batch folders of the change log.
    change_rows: dict[str, int]
    current_rows: dict[str, int]
    raw_batches: dict[str, int]
    quarantine_by_reason: dict[str, int]
    # Set when `lakehouse switch` pointed readers away from the data directory.
    active_root: str | None = None
    # Warnings for landing files modified after the stream read them.
    landing_changes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        width = max([len(table) for table in self.change_rows] + [len("raw table")])
        out = [f"active data root: {self.active_root}"] if self.active_root else []
        out += [f"{'raw table':<{width}}  {'change log':>10}  {'current':>8}  {'batches':>7}"]
        out += [
            f"{table:<{width}}  {rows:>10}  {self.current_rows[table]:>8}  {self.raw_batches[table]:>7}"
            for table, rows in self.change_rows.items()
        ]
        total = sum(self.quarantine_by_reason.values())
        out.append(f"quarantine: {total} rows" + (":" if total else ""))
        out += [f"  {reason:<40} {rows:>6}" for reason, rows in sorted(self.quarantine_by_reason.items())]
        out += [f"WARNING: {warning}" for warning in self.landing_changes]
        return out


@dataclass(frozen=True)
class DemoResult:
    generation: GenerationSummary
    status: StatusReport
    marts_summary: str | None


def default_data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV) or "data")


def _contracts(contracts_dir: str | None) -> dict[str, TableContract]:
    try:
        return load_contracts(contracts_dir)
    except ContractError as exc:
        raise CliError(f"invalid table contracts: {exc}") from exc


@contextmanager
def writing(layout: DataLayout, command: str, out: Printer = print) -> Iterator[None]:
    """Hold the data directory's single-writer lock (streaming/data_lock.py) while the block
    runs; every command that writes the data directory runs inside it."""
    try:
        with hold_data_dir(layout.root, command, report=out):
            yield
    except DataDirLocked as exc:
        raise CliError(str(exc)) from exc


def active_layout(layout: DataLayout) -> DataLayout:
    """Where raw tables, quarantine and checkpoints live now (see `lakehouse switch`)."""
    try:
        return DataLayout(read_pointer(layout.root).data_root)
    except SwitchError as exc:
        raise CliError(str(exc)) from exc


def landing_files(layout: DataLayout) -> list[Path]:
    """The objects the stream reads: every file below the landing folder except hidden
    ones (a name starting with `_` or `.`, as Spark's file listing skips them)."""
    from streaming.sources import local_landing_files

    return local_landing_files(layout.landing)


def landing_ledger_dir(layout: DataLayout) -> Path:
    from streaming.landing_ledger import LEDGER_DIR_NAME

    return layout.raw / LEDGER_DIR_NAME


def generate(layout: DataLayout, *, out: Printer = print, **generator_options: object) -> GenerationSummary:
    from streaming.operations.generator import write_landing_files

    out(f"generating sample CDC into {layout.landing} ...")
    try:
        summary = write_landing_files(layout.landing, **generator_options)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    events = ", ".join(
        f"{table}: " + " ".join(f"{name}={count}" for name, count in sorted(names.items()))
        for table, names in summary.events.items()
    )
    out(
        f"wrote {summary.records} records in {len(summary.files)} files "
        f"({events}; {summary.duplicates} re-delivered duplicates, {summary.malformed} malformed)"
    )
    return summary


@contextmanager
def _spark_session(given: SparkSession | None, out: Printer, master: str | None = None) -> Iterator[SparkSession]:
    """The caller's session (tests, the demo) as it is, or a new one stopped afterwards, on
    `master` (default: spark-submit's master, else local)."""
    if given is not None:
        yield given
        return
    from streaming.spark import JavaNotFoundError, local_session, resolve_master

    try:
        master = resolve_master(master)
        out(f"starting Spark ({master}) ...")
        session = local_session(master=master)
    except JavaNotFoundError as exc:
        raise CliError(str(exc)) from exc
    try:
        yield session
    finally:
        session.stop()


def stream(
    layout: DataLayout,
    *,
    trigger: str = "available-now",
    interval: str = "100 seconds",
    sink: str = "auto",
    contracts_dir: str | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    master: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> None:
    """Stream the landing files into the raw tables; processing-time runs until Ctrl-C.
    `master` is used only when no `spark` session is given."""
    if not landing_files(layout):
        raise CliError(f"no landing files under {layout.landing}; run `lakehouse generate` first")
    contracts = _contracts(contracts_dir)
    # Lock and identity are checked before Spark starts: a refusal costs no JVM start.
    with writing(layout, "stream", out):
        target = active_layout(layout)
        stream_id = _claim_stream_identity(target.root, target.checkpoint(QUERY_NAME), layout.landing, contracts)
        _guard_contracts(target, contracts, out)
        with _spark_session(spark, out, master) as session:
            pipeline = _pipeline(session, target, contracts, sink, stream_id=stream_id)
            _stream_with(session, layout, target, pipeline, trigger, interval,
                         (max_files_per_trigger, max_bytes_per_trigger), out)


def _stream_with(
    spark: SparkSession,
    layout: DataLayout,
    target: DataLayout,
    pipeline: Pipeline,
    trigger: str,
    interval: str,
    batch_limits: tuple[int | None, int | None],
    out: Printer,
) -> None:
    from pyspark.errors import StreamingQueryException

    from streaming.landing_ledger import changed_files
    from streaming.runner import deferred_stop_signals, run_stream, stop_between_batches
    from streaming.sources import files_per_trigger, landing_files_stream

    checkpoint = target.checkpoint(QUERY_NAME)
    ledger = landing_ledger_dir(target)
    for changed in changed_files(ledger):
        out(f"WARNING: {changed.warning()}")
    max_files, max_bytes = batch_limits
    size = files_per_trigger(spark, str(layout.landing), max_files, max_bytes)
    source = landing_files_stream(spark, str(layout.landing), ledger_dir=str(ledger), trigger_size=size)
    out(f"streaming {layout.landing} -> {target.raw} (trigger {trigger}; {size.explanation}) ...")
    started = time.monotonic()
    # A processing-time stream runs until Ctrl-C; from its start, Ctrl-C waits for the batch in progress.
    stop_signals = deferred_stop_signals(out) if trigger == "processing-time" else nullcontext(None)
    try:
        with stop_signals as stop_requested:
            query = run_stream(
                spark,
                pipeline,
                source,
                checkpoint_dir=str(checkpoint),
                trigger=trigger,  # type: ignore[arg-type]
                interval=interval,
                query_name=QUERY_NAME,
            )
            if stop_requested is not None:
                out(f"running: one micro-batch every {interval}; Ctrl-C stops it after the current batch")
                if stop_between_batches(query, stop_requested):
                    out("stopped")
    except StreamingQueryException as exc:
        raise CliError(f"the stream stopped on an error (nothing past the failed batch was committed): {exc}") from exc
    out(f"stream finished in {time.monotonic() - started:.1f}s")


def _claim_stream_identity(
    data_root: Path, checkpoint: Path, landing: Path, contracts: dict[str, TableContract]
) -> str:
    from streaming.stream_identity import StreamIdentityError, claim_stream_identity

    try:
        return claim_stream_identity(data_root, checkpoint, landing, contracts)
    except StreamIdentityError as exc:
        raise CliError(str(exc)) from exc


def _guard_contracts(target: DataLayout, contracts: dict[str, TableContract], out: Printer) -> None:
    """Check the contracts against the versions `target`'s raw tables were written with
    (additions are registered and reported; a rename or type change is refused)."""
    from datetime import datetime, timezone

    from streaming.evolution import ContractEvolutionError, ContractRegistry, guard_contracts

    try:
        guard_contracts(ContractRegistry(target.raw), contracts, datetime.now(timezone.utc), report=out)
    except ContractEvolutionError as exc:
        raise CliError(str(exc)) from exc


def _pipeline(
    spark: SparkSession,
    target: DataLayout,
    contracts: dict[str, TableContract],
    sink: str,
    *,
    stream_id: str | None = None,
) -> Pipeline:
    """The pipeline writing raw tables and quarantine under `target` (stream, backfill, reprocess)."""
    from streaming.contract import check_partition_expression
    from streaming.pipeline import Pipeline
    from streaming.sinks import QuarantineWriter, choose_sink

    try:
        for contract in contracts.values():
            check_partition_expression(spark, contract)
        raw_sink = choose_sink(sink, spark, data_dir=str(target.root), contracts=contracts,  # type: ignore[arg-type]
                               stream_id=stream_id)
    except (ContractError, RuntimeError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    return Pipeline(contracts, raw_sink, QuarantineWriter(str(target.root)))


def status(layout: DataLayout, *, contracts_dir: str | None = None) -> StatusReport:
    """Row counts of the local raw change logs, their current state and the quarantine, read with DuckDB."""
    import duckdb

    from streaming import raw_layout
    from streaming.landing_ledger import changed_files

    contracts = _contracts(contracts_dir)
    data_dir = layout.root
    layout = active_layout(layout)
    change_rows: dict[str, int] = {}
    current_rows: dict[str, int] = {}
    raw_batches: dict[str, int] = {}
    with duckdb.connect() as connection, _naming_unreadable_parquet(layout):
        for contract in contracts.values():
            table_dir = raw_layout.change_log_dir(layout.raw, contract)
            if (table_dir / ".hoodie").is_dir():
                raise CliError(f"{table_dir} is a Hudi table; `status` counts the local Parquet change log only")
            files = raw_layout.change_log_files(table_dir)
            change_rows[contract.raw_table], current_rows[contract.raw_table] = _count_rows_and_keys(
                connection, files, contract.key_columns
            )
            raw_batches[contract.raw_table] = len({path.parent for path in files})
        quarantine_files = sorted(layout.quarantine.glob("_batch_id=*/*.parquet"))
        by_reason: dict[str, int] = {}
        if quarantine_files:
            rows = connection.execute(
                "select reason, count(*) from read_parquet(?) group by reason",
                [[str(path) for path in quarantine_files]],
            ).fetchall()
            by_reason = {reason: count for reason, count in rows}
    switched = (data_dir / POINTER_FILE).is_file()
    changes = tuple(changed.warning() for changed in changed_files(landing_ledger_dir(layout)))
    return StatusReport(change_rows, current_rows, raw_batches, by_reason, str(layout.root) if switched else None,
                        changes)


@contextmanager
def _naming_unreadable_parquet(layout: DataLayout) -> Iterator[None]:
    """Turn DuckDB's failure on a damaged Parquet file (cut short by a crash or a copy)
    into an error that names every unreadable file under raw/ and quarantine/."""
    import duckdb

    try:
        yield
    except duckdb.Error as exc:
        unreadable = []
        with duckdb.connect() as probe:
            for path in sorted([*layout.raw.rglob("*.parquet"), *layout.quarantine.rglob("*.parquet")]):
                try:
                    probe.execute("select count(*) from parquet_metadata(?)", [str(path)]).fetchall()
                except duckdb.Error as problem:
                    unreadable.append(f"  {path}: {str(problem).splitlines()[0]}")
        if not unreadable:
            raise CliError(f"cannot count the raw tables: {exc}") from exc
        raise CliError(
            f"{len(unreadable)} Parquet file(s) cannot be read:\n" + "\n".join(unreadable)
            + "\nrestore them from a backup, or rebuild the raw tables with `lakehouse reprocess`"
        ) from exc


def _count_rows_and_keys(connection: object, files: list[Path], key_columns: Sequence[str]) -> tuple[int, int]:
    """Rows of a change log, and its distinct keys: the rows of its current state."""
    if not files:
        return 0, 0
    keys = ", ".join(f'"{column}"' for column in key_columns)
    rows, distinct_keys = connection.execute(  # type: ignore[attr-defined]
        f"select count(*), count(distinct ({keys})) from read_parquet(?)", [[str(path) for path in files]]
    ).fetchone()
    return int(rows), int(distinct_keys)


def backfill(
    layout: DataLayout,
    export_dir: Path,
    *,
    table: str | None = None,
    dry_run: bool = False,
    sink: str = "auto",
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> BackfillResult | None:
    """Load a DynamoDB export into its raw table as one batch; a dry run only describes it."""
    from streaming.operations.backfill import BackfillError, plan_backfill, run_backfill
    from streaming.operations.export import ExportValidationError

    contracts = _contracts(contracts_dir)
    target = active_layout(layout)
    try:
        plan = plan_backfill(export_dir, contracts, target.root, table)
    except (ExportValidationError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    out(f"export {plan.manifest.export_dir} is valid")
    for line in plan.describe():
        out(line)
    if dry_run:
        out("dry run: nothing was written")
        return None
    with writing(layout, "backfill", out):
        _guard_contracts(target, contracts, out)
        with _spark_session(spark, out) as session:
            pipeline = _pipeline(session, target, contracts, sink)
            try:
                result = run_backfill(session, plan, pipeline, out=out)
            except (BackfillError, ExportValidationError) as exc:
                raise CliError(f"backfill failed (safe to retry: it rewrites batch {plan.batch_id}): {exc}") from exc
    out(result.summary())
    return result


def reprocess(
    layout: DataLayout,
    to: Path,
    *,
    from_landing: Path | None = None,
    dry_run: bool = False,
    sink: str = "auto",
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> StatusReport | None:
    """Rebuild every raw table under `to` (backfills, then landing files); the live tables stay as they are."""
    from pyspark.errors import StreamingQueryException

    from streaming.operations.backfill import BackfillError
    from streaming.operations.export import ExportValidationError
    from streaming.operations.reprocess import plan_reprocess, run_reprocess
    from streaming.stream_identity import StreamIdentityError

    contracts = _contracts(contracts_dir)
    try:
        plan = plan_reprocess(layout.root, to, from_landing)
    except SwitchError as exc:
        raise CliError(str(exc)) from exc
    for line in plan.describe():
        out(line)
    if dry_run:
        out("dry run: nothing was written")
        return None
    with writing(layout, "reprocess", out), _spark_session(spark, out) as session:
        def make_pipeline(stream_id: str) -> Pipeline:
            _guard_contracts(DataLayout(plan.target), contracts, out)
            return _pipeline(session, DataLayout(plan.target), contracts, sink, stream_id=stream_id)

        try:
            seconds = run_reprocess(session, plan, make_pipeline, contracts, out=out)
        except StreamIdentityError as exc:
            raise CliError(str(exc)) from exc
        except (StreamingQueryException, BackfillError, ExportValidationError) as exc:
            raise CliError(f"reprocess stopped (run it again to resume from its checkpoint): {exc}") from exc
    rebuilt = status(DataLayout(plan.target), contracts_dir=contracts_dir)
    for line in rebuilt.lines():
        out(line)
    out(f"reprocess finished in {seconds:.1f}s; check it with "
        f"`lakehouse reconcile --source {read_pointer(layout.root).raw_dir} --target {plan.target / 'raw'}`, "
        f"then `lakehouse switch --to {plan.target}`")
    return rebuilt


def switch(
    layout: DataLayout,
    to: str | None,
    *,
    rollback: bool = False,
    glue_database: str | None = None,
    table: str | None = None,
    contracts_dir: str | None = None,
    glue_client: object | None = None,
    out: Printer = print,
) -> None:
    """Point readers at another raw location (local pointer or Glue table locations), or roll back."""
    from streaming.operations.reprocess import rollback_glue_table, rollback_local, switch_glue_table, switch_local

    if rollback == (to is not None):
        raise CliError("give either --to <location> or --rollback")
    contracts = _contracts(contracts_dir)
    if table is not None:
        contracts = {name: c for name, c in contracts.items() if table in (name, c.raw_table)}
        if not contracts:
            raise CliError(f"no table contract named {table!r}")
    try:
        if glue_database is None:
            with writing(layout, "switch", out):
                active = rollback_local(layout.root) if rollback else switch_local(layout.root, Path(to or ""), contracts)
            out(f"active data root: {active.data_root} (previous: {active.previous})")
            out(f"dbt reads it with: export {RAW_DIR_ENV}={active.raw_dir}")
            return
        glue = glue_client or _glue_client()
        for contract in contracts.values():
            if rollback:
                moved = rollback_glue_table(glue, glue_database, contract.raw_table)
            else:
                from streaming.hudi_options import hudi_table_path

                moved = switch_glue_table(glue, glue_database, contract.raw_table,
                                          hudi_table_path(to or "", contract.raw_table))
            out(f"glue {moved.database}.{moved.table}: {moved.previous_location} -> {moved.location} "
                f"({moved.partitions_moved} partitions)")
    except SwitchError as exc:
        raise CliError(str(exc)) from exc


def _glue_client() -> object:
    import boto3

    # Region and credentials come from the standard chain (env, profile, instance role).
    return boto3.client("glue")


def reconcile(
    source: str,
    target: str,
    *,
    table: str | None = None,
    json_path: Path | None = None,
    contracts_dir: str | None = None,
    data_dir: Path | None = None,
    out: Printer = print,
) -> ReconcileReport:
    """Compare source and target per table; raises ReconcileMismatch when they differ.

    PII key columns in the samples are shown as the marts' pseudonyms, with the PII key
    of `data_dir` (or env LAKEHOUSE_PII_KEY), or withheld when there is none."""
    from lakehouse_dbt.pii_key import PiiKeyError

    from streaming.operations.export import ExportValidationError
    from streaming.operations.reconcile import (
        ReconcileError,
        check_report_path,
        reconcile as compare,
        report_pii_key,
        write_json_report,
    )

    contracts = _contracts(contracts_dir)
    try:
        if json_path is not None:
            check_report_path(json_path)
        report = compare(source, target, contracts, table=table, pii_key=report_pii_key(data_dir))
    except (ReconcileError, ExportValidationError, PiiKeyError) as exc:
        raise CliError(str(exc)) from exc
    for line in report.lines():
        out(line)
    if json_path is not None:
        write_json_report(report, json_path)
        out(f"report written to {json_path}")
    if not report.ok:
        raise ReconcileMismatch(f"{sum(not t.ok for t in report.tables)} table(s) differ")
    return report


def quarantine(
    layout: DataLayout,
    action: str,
    *,
    reason: str | None = None,
    table: str | None = None,
    batches: Sequence[int] = (),
    limit: int = 5,
    sink: str = "auto",
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> object:
    """`summary`, `show` or `replay` of the active data root's quarantine (streaming.operations.quarantine)."""
    from streaming.operations import quarantine as ops

    contracts = _contracts(contracts_dir)
    target = active_layout(layout)
    if action == "summary":
        summary = ops.summarize(target.root)
        for line in summary.lines():
            out(line)
        return summary
    if action == "show":
        from lakehouse_dbt.pii_key import PiiKeyError, resolve_key

        if reason is None:
            raise CliError("show needs --reason (see `lakehouse quarantine summary`)")
        try:
            # The marts' key: env LAKEHOUSE_PII_KEY, else the data directory's key file.
            key = resolve_key({**os.environ, DATA_DIR_ENV: str(layout.root)})
        except PiiKeyError as exc:
            raise CliError(str(exc)) from exc
        rows = ops.select_records(ops.open_records(target.root), reason=reason, table=table, batches=batches)
        for line in ops.show_lines(rows[:limit], ops.PiiMasker(ops.pii_labels(contracts), key)):
            out(line)
        out(f"shown {min(limit, len(rows))} of {len(rows)} open records with reason {reason}")
        return rows[:limit]
    # Planned under the lock too: a replay running elsewhere could change what is open.
    with writing(layout, "quarantine replay", out):
        try:
            plan = ops.plan_replay(target.root, reason=reason, table=table, batches=batches)
        except ops.QuarantineError as exc:
            raise CliError(str(exc)) from exc
        for line in plan.describe():
            out(line)
        if not plan.records:
            out("nothing to replay")
            return None
        _guard_contracts(target, contracts, out)
        with _spark_session(spark, out) as session:
            pipeline = _pipeline(session, target, contracts, sink)
            try:
                result = ops.run_replay(session, plan, pipeline.contracts, pipeline.sink, out=out)
            except ops.QuarantineError as exc:
                raise CliError(f"replay failed (run replay again: it resumes batch {plan.batch_id}): {exc}") from exc
    out(result.summary())
    return result


def run_dbt_command(layout: DataLayout, dbt_args: Sequence[str], *, out: Printer = print) -> None:
    """`dbt <args>` on this repository's project with the local data directory.

    dbt writes its own progress; a failure ends with dbt's own error (lakehouse_dbt's
    failure_summary), not only a pointer to a log that a usage error never writes.
    """
    from lakehouse_dbt.runner import failure_summary, run_dbt

    if not dbt_args:
        raise CliError("name a dbt command, e.g. `lakehouse dbt build`")
    if not layout.root.is_dir():
        # dbt would create it empty and build nothing from it; a mistyped path is the likely cause.
        raise CliError(f"data directory {layout.root} does not exist; give --data-dir, or run `lakehouse demo`")
    result = run_dbt(list(dbt_args), layout.root)
    if not result.success:
        log_file = layout.root / "dbt" / "logs" / "dbt.log"
        where = f"\nfull log: {log_file}" if log_file.is_file() else ""
        raise CliError(f"dbt {' '.join(dbt_args)} failed: {failure_summary(result)}{where}")


def serve_docs_site(layout: DataLayout, port: int) -> None:
    """`dbt docs generate` for the local target, served on 127.0.0.1 until Ctrl-C."""
    from lakehouse_dbt.docs_site import DocsSiteError, serve_docs

    if not 0 <= port <= 65535:
        raise CliError(f"--port must be between 0 and 65535, not {port}")
    try:
        # Flushed: the address must reach a pipe (a script, a test) while the server runs.
        serve_docs(layout.root, port, out=lambda line: print(line, flush=True))
    except DocsSiteError as exc:
        raise CliError(str(exc)) from exc


def run_demo(
    layout: DataLayout,
    *,
    seed: int = 7,
    customers: int = 200,
    record_format: str = "mixed",
    sink: str = "auto",
    contracts_dir: str | None = None,
    build_marts: bool = True,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> DemoResult:
    """Fresh sample data -> stream (available-now) -> counts -> dbt build -> mart summary."""
    with writing(layout, "demo", out):
        return _demo(layout, seed, customers, record_format, sink, contracts_dir, build_marts, spark, out)


def _demo(
    layout: DataLayout,
    seed: int,
    customers: int,
    record_format: str,
    sink: str,
    contracts_dir: str | None,
    build_marts: bool,
    spark: SparkSession | None,
    out: Printer,
) -> DemoResult:
    from streaming.operations.demo_dir import DemoDirRefused, prepare_demo_dir

    steps = 4 if build_marts else 3
    try:
        done = prepare_demo_dir(layout.root)
    except DemoDirRefused as exc:
        raise CliError(str(exc)) from exc
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
        from lakehouse_dbt import summarize_marts

        out(f"[4/{steps}] dbt build on the local DuckDB target (staging -> intermediate -> marts, with tests)")
        run_dbt_command(layout, ["build"], out=out)
        marts_summary = summarize_marts(layout.root)
        out(marts_summary)
        out("documentation of these tables (descriptions, columns, lineage): run `lakehouse docs` "
            "and open http://127.0.0.1:8080/; `select * from lakehouse_marts.mart_freshness` shows how current each is")
    return DemoResult(generation, report, marts_summary)


def _add_project_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--data-dir", type=Path, default=default, help=f"data directory (default ${DATA_DIR_ENV} or ./data)"
    )
    parser.add_argument("--contracts-dir", default=default, help="table contracts folder (default: packaged)")


_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)


def byte_size(text: str) -> int:
    """Bytes of a size written as Spark writes them: `536870912`, `512m`, `512MiB`, `1g`
    (k/m/g are powers of 1024, as in Spark's byte-size settings)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"not a size: {text!r}; write e.g. 512m or 1g (powers of 1024)")
    return int(match.group(1)) * 1024 ** " kmg".index(match.group(2).lower() or " ")


def _size_argument(text: str) -> int:
    try:
        return byte_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _interval_argument(text: str) -> str:
    from streaming.runner import checked_interval

    try:
        return checked_interval(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _take_project_options(args: argparse.Namespace) -> None:
    """Move `--data-dir` / `--contracts-dir` found among dbt's arguments (`lakehouse dbt
    build --data-dir X`) onto `args`; dbt gets the rest in their order."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _add_project_options(own, default=argparse.SUPPRESS)
    found, args.dbt_args = own.parse_known_args(args.dbt_args)
    vars(args).update(vars(found))


def build_parser() -> argparse.ArgumentParser:
    from streaming.operations.generator import LANDING_LAYOUTS, RECORD_FORMATS

    # The project's own options go before or after the subcommand: the main parser sets
    # their defaults, a subcommand sets them only when given there (SUPPRESS).
    common = argparse.ArgumentParser(add_help=False)
    _add_project_options(common, default=argparse.SUPPRESS)

    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__.splitlines()[0])
    _add_project_options(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", parents=[common], help="land sample DynamoDB CDC as JSON lines")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--customers", type=int, default=200)
    gen.add_argument("--orders-per-customer", type=int, default=3)
    gen.add_argument("--records-per-file", type=int, default=500)
    gen.add_argument("--format", dest="record_format", choices=RECORD_FORMATS, default="mixed",
                     help="DynamoDB Streams records, Kinesis Data Streams records, or both")
    gen.add_argument("--layout", dest="file_layout", choices=LANDING_LAYOUTS, default="jsonl",
                     help="jsonl: cdc-<n>.jsonl, a record per line; firehose: Firehose object names, "
                          "records concatenated without delimiter")
    gen.add_argument("--gzip", action="store_true", help="GZIP each file and add .gz, as Firehose does")

    run = commands.add_parser("stream", parents=[common], help="stream landing files into the raw tables")
    run.add_argument("--trigger", choices=("available-now", "processing-time"), default="available-now")
    run.add_argument("--interval", type=_interval_argument, default="100 seconds",
                     help="micro-batch interval for processing-time, e.g. '30 seconds'")
    run.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")
    run.add_argument("--max-bytes-per-trigger", type=_size_argument, default=None,
                     help="landing bytes per micro-batch, e.g. 256m or 1g (default 512m; turned into a file "
                          "count from the mean landing file size when the stream starts)")
    run.add_argument("--max-files-per-trigger", type=int, default=None,
                     help="landing files per micro-batch (caps the count the byte budget gives)")
    run.add_argument("--master", default=None,
                     help=f"Spark master URL, e.g. spark://host:7077 or yarn "
                          f"(default: spark-submit's --master, else {DEFAULT_MASTER})")

    commands.add_parser("status", parents=[common], help="row counts of raw tables and quarantine reasons")

    demo = commands.add_parser(
        "demo", parents=[common], help="generate -> stream -> counts -> dbt build -> mart summary, from scratch"
    )
    demo.add_argument("--skip-dbt", action="store_true", help="stop after the raw layer")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--customers", type=int, default=200)
    demo.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")

    fill = commands.add_parser("backfill", parents=[common], help="load a DynamoDB export into its raw table")
    fill.add_argument("--export", type=Path, required=True, help="export folder .../AWSDynamoDB/<export-id>")
    fill.add_argument("--table", default=None, help="DynamoDB table the export must be of")
    fill.add_argument("--dry-run", action="store_true", help="validate and describe, write nothing")
    fill.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")

    again = commands.add_parser("reprocess", parents=[common],
                                help="rebuild the raw tables in a new location (live tables untouched)")
    again.add_argument("--to", type=Path, required=True, help="new data root (gets raw/, quarantine/, checkpoints/)")
    again.add_argument("--from-landing", type=Path, default=None, help="landing folder (default <data dir>/landing)")
    again.add_argument("--dry-run", action="store_true", help="describe, write nothing")
    again.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")

    move = commands.add_parser("switch", parents=[common], help="point raw readers at another location, or back")
    target = move.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", default=None, help="data root (local) or S3 prefix of the raw tables (--glue-database)")
    target.add_argument("--rollback", action="store_true", help="return to the location before the last switch")
    move.add_argument("--glue-database", default=None, help="switch these Glue Catalog tables instead of the local pointer")
    move.add_argument("--table", default=None, help="only this table (default: every contracted table)")

    check = commands.add_parser("reconcile", parents=[common], help="compare a source of truth with the raw result")
    check.add_argument("--source", required=True, help="export folder or raw folder")
    check.add_argument("--target", required=True, help="raw folder or <file>.duckdb:<schema>.<table>")
    check.add_argument("--table", default=None, help="only this table")
    check.add_argument("--json", dest="json_path", type=Path, default=None, help="also write the report as JSON")
    held = commands.add_parser("quarantine", parents=[common], help="quarantine counts, PII-masked payloads, and replay after a fix")
    actions = held.add_subparsers(dest="action", required=True)
    actions.add_parser("summary", parents=[common], help="open quarantined rows by table, reason and day")
    show = actions.add_parser("show", parents=[common], help="a few payloads of one reason, PII hidden")
    replay = actions.add_parser("replay", parents=[common],
                                help="run open quarantined records through the pipeline again, exactly once")
    for action in (show, replay):
        action.add_argument("--reason", required=action is show, default=None,
                            help="a reason, or its prefix before ':' (e.g. missing_key)")
        action.add_argument("--table", default=None, help="only records of this DynamoDB table")
        action.add_argument("--batch", dest="batches", type=int, action="append", default=[],
                            help="only records quarantined by this batch id (repeatable)")
    show.add_argument("--limit", type=int, default=5)
    replay.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")

    dbt = commands.add_parser(
        "dbt", parents=[common], help="run dbt on this project with the data directory (e.g. `lakehouse dbt build`)"
    )
    dbt.add_argument("dbt_args", nargs=argparse.REMAINDER, help="dbt command and its options")
    docs = commands.add_parser("docs", parents=[common], help="generate the dbt docs site and serve it on 127.0.0.1")
    docs.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 picks a free one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "dbt":
        _take_project_options(args)
    # Our batch lines at INFO; py4j's callback chatter stays below WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("streaming").setLevel(logging.INFO)
    layout = DataLayout(args.data_dir or default_data_dir())
    try:
        if args.command == "generate":
            generate(
                layout,
                seed=args.seed,
                customers=args.customers,
                orders_per_customer=args.orders_per_customer,
                records_per_file=args.records_per_file,
                record_format=args.record_format,
                file_layout=args.file_layout,
                gzip=args.gzip,
            )
        elif args.command == "stream":
            if args.max_files_per_trigger is not None and args.max_files_per_trigger < 1:
                raise CliError("--max-files-per-trigger must be at least 1")
            stream(
                layout,
                trigger=args.trigger,
                interval=args.interval,
                sink=args.sink,
                contracts_dir=args.contracts_dir,
                max_files_per_trigger=args.max_files_per_trigger,
                max_bytes_per_trigger=args.max_bytes_per_trigger,
                master=args.master,
            )
        elif args.command == "status":
            for line in status(layout, contracts_dir=args.contracts_dir).lines():
                print(line)
        elif args.command == "backfill":
            backfill(layout, args.export, table=args.table, dry_run=args.dry_run, sink=args.sink,
                     contracts_dir=args.contracts_dir)
        elif args.command == "reprocess":
            reprocess(layout, args.to, from_landing=args.from_landing, dry_run=args.dry_run, sink=args.sink,
                      contracts_dir=args.contracts_dir)
        elif args.command == "switch":
            switch(layout, args.to, rollback=args.rollback, glue_database=args.glue_database, table=args.table,
                   contracts_dir=args.contracts_dir)
        elif args.command == "reconcile":
            reconcile(args.source, args.target, table=args.table, json_path=args.json_path,
                      contracts_dir=args.contracts_dir, data_dir=layout.root)
        elif args.command == "quarantine":
            quarantine(layout, args.action, reason=getattr(args, "reason", None), table=getattr(args, "table", None),
                       batches=getattr(args, "batches", ()), limit=getattr(args, "limit", 5),
                       sink=getattr(args, "sink", "auto"), contracts_dir=args.contracts_dir)
        elif args.command == "dbt":
            run_dbt_command(layout, args.dbt_args)
        elif args.command == "docs":
            serve_docs_site(layout, args.port)
        else:
            run_demo(layout, seed=args.seed, customers=args.customers, sink=args.sink, contracts_dir=args.contracts_dir,
                     build_marts=not args.skip_dbt)
    except CliError as exc:
        print(f"lakehouse {args.command}: {exc}", file=sys.stderr)
        return 2
    except ReconcileMismatch as exc:
        print(f"lakehouse {args.command}: {exc}", file=sys.stderr)
        return MISMATCH_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main())
