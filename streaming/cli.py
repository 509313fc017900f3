"""The `lakehouse` console script: generate sample CDC, stream it to raw, inspect, demo.

Everything lives under one data directory (default `./data`, or `$LAKEHOUSE_DATA_DIR`),
laid out as docs/architecture.md describes.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.contract import ContractError, TableContract, load_contracts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.generator import GenerationSummary

DATA_DIR_ENV = "LAKEHOUSE_DATA_DIR"
QUERY_NAME = "landing_to_raw"
# Generated and derived folders of a data directory; `demo` starts from none of them.
GENERATED_FOLDERS = ("landing", "checkpoints", "raw", "quarantine")

Printer = Callable[[str], None]


class CliError(Exception):
    """A user-facing problem: printed without a traceback, exit code 2."""


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
    raw_rows: dict[str, int]
    raw_batches: dict[str, int]
    quarantine_by_reason: dict[str, int]

    def lines(self) -> list[str]:
        width = max([len(table) for table in self.raw_rows] + [len("raw table")])
        out = [f"{'raw table':<{width}}  {'rows':>8}  {'batches':>7}"]
        out += [
            f"{table:<{width}}  {rows:>8}  {self.raw_batches[table]:>7}" for table, rows in self.raw_rows.items()
        ]
        total = sum(self.quarantine_by_reason.values())
        out.append(f"quarantine: {total} rows" + (":" if total else ""))
        out += [f"  {reason:<40} {rows:>6}" for reason, rows in sorted(self.quarantine_by_reason.items())]
        return out


@dataclass(frozen=True)
class DemoResult:
    generation: GenerationSummary
    status: StatusReport


def default_data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV) or "data")


def _contracts(contracts_dir: str | None) -> dict[str, TableContract]:
    try:
        return load_contracts(contracts_dir)
    except ContractError as exc:
        raise CliError(f"invalid table contracts: {exc}") from exc


def landing_files(layout: DataLayout) -> list[Path]:
    return sorted(layout.landing.rglob("*.jsonl")) if layout.landing.is_dir() else []


def generate(layout: DataLayout, *, out: Printer = print, **generator_options: object) -> GenerationSummary:
    from streaming.generator import write_landing_files

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


def _start_spark(out: Printer) -> SparkSession:
    from streaming.spark import JavaNotFoundError, local_session

    out("starting Spark (local) ...")
    try:
        return local_session()
    except JavaNotFoundError as exc:
        raise CliError(str(exc)) from exc


def stream(
    layout: DataLayout,
    *,
    trigger: str = "available-now",
    interval: str = "100 seconds",
    sink: str = "auto",
    contracts_dir: str | None = None,
    max_files_per_trigger: int | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> None:
    """Stream the landing files into the raw tables; processing-time runs until Ctrl-C."""
    if not landing_files(layout):
        raise CliError(f"no landing files (*.jsonl) under {layout.landing}; run `lakehouse generate` first")
    contracts = _contracts(contracts_dir)
    own_session = spark is None
    spark = spark or _start_spark(out)
    try:
        _stream_with(spark, layout, contracts, trigger, interval, sink, max_files_per_trigger, out)
    finally:
        if own_session:
            spark.stop()


def _stream_with(
    spark: SparkSession,
    layout: DataLayout,
    contracts: dict[str, TableContract],
    trigger: str,
    interval: str,
    sink: str,
    max_files_per_trigger: int | None,
    out: Printer,
) -> None:
    from pyspark.errors import StreamingQueryException

    from streaming.contract import check_partition_expression
    from streaming.pipeline import Pipeline
    from streaming.runner import run_stream
    from streaming.sinks import QuarantineWriter, choose_sink
    from streaming.sources import landing_files_stream

    try:
        for contract in contracts.values():
            check_partition_expression(spark, contract)
        raw_sink = choose_sink(sink, spark, data_dir=str(layout.root), contracts=contracts)  # type: ignore[arg-type]
    except (ContractError, RuntimeError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    pipeline = Pipeline(contracts, raw_sink, QuarantineWriter(str(layout.root)))
    source = landing_files_stream(spark, str(layout.landing), max_files_per_trigger)
    out(f"streaming {layout.landing} -> {layout.raw} (trigger {trigger}) ...")
    started = time.monotonic()
    try:
        query = run_stream(
            spark,
            pipeline,
            source,
            checkpoint_dir=str(layout.checkpoint(QUERY_NAME)),
            trigger=trigger,  # type: ignore[arg-type]
            interval=interval,
            query_name=QUERY_NAME,
        )
        if trigger == "processing-time":
            out(f"running: one micro-batch every {interval}; Ctrl-C stops it")
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
                out("stopped")
    except StreamingQueryException as exc:
        raise CliError(f"the stream stopped on an error (nothing past the failed batch was committed): {exc}") from exc
    out(f"stream finished in {time.monotonic() - started:.1f}s")


def status(layout: DataLayout, *, contracts_dir: str | None = None) -> StatusReport:
    """Row counts of the local raw change log and of the quarantine, read with DuckDB."""
    import duckdb

    contracts = _contracts(contracts_dir)
    raw_rows: dict[str, int] = {}
    raw_batches: dict[str, int] = {}
    with duckdb.connect() as connection:
        for contract in contracts.values():
            table_dir = layout.raw / contract.raw_table
            if (table_dir / ".hoodie").is_dir():
                raise CliError(f"{table_dir} is a Hudi table; `status` counts the local Parquet change log only")
            files = sorted(table_dir.glob("_batch_id=*/*.parquet"))
            raw_rows[contract.raw_table] = _count_rows(connection, files)
            raw_batches[contract.raw_table] = len({path.parent for path in files})
        quarantine_files = sorted(layout.quarantine.glob("_batch_id=*/*.parquet"))
        by_reason: dict[str, int] = {}
        if quarantine_files:
            rows = connection.execute(
                "select reason, count(*) from read_parquet(?) group by reason",
                [[str(path) for path in quarantine_files]],
            ).fetchall()
            by_reason = {reason: count for reason, count in rows}
    return StatusReport(raw_rows, raw_batches, by_reason)


def _count_rows(connection: object, files: list[Path]) -> int:
    if not files:
        return 0
    (count,) = connection.execute(  # type: ignore[attr-defined]
        "select count(*) from read_parquet(?)", [[str(path) for path in files]]
    ).fetchone()
    return int(count)


def clear_generated(layout: DataLayout) -> None:
    for name in GENERATED_FOLDERS:
        shutil.rmtree(layout.root / name, ignore_errors=True)


def run_demo(
    layout: DataLayout,
    *,
    seed: int = 7,
    customers: int = 200,
    record_format: str = "mixed",
    sink: str = "auto",
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> DemoResult:
    """Fresh sample data -> stream (available-now) -> counts. Later steps (dbt) extend this."""
    out(f"[1/3] fresh data directory {layout.root}")
    clear_generated(layout)
    generation = generate(layout, seed=seed, customers=customers, record_format=record_format, out=out)
    out("[2/3] streaming landing files into the raw tables")
    stream(layout, sink=sink, contracts_dir=contracts_dir, spark=spark, out=out)
    out("[3/3] raw tables and quarantine")
    report = status(layout, contracts_dir=contracts_dir)
    for line in report.lines():
        out(line)
    return DemoResult(generation, report)


def build_parser() -> argparse.ArgumentParser:
    from streaming.generator import RECORD_FORMATS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, default=None, help=f"data directory (default ${DATA_DIR_ENV} or ./data)"
    )
    common.add_argument("--contracts-dir", default=None, help="table contracts folder (default: packaged)")

    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", parents=[common], help="land sample DynamoDB CDC as JSON lines")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--customers", type=int, default=200)
    gen.add_argument("--orders-per-customer", type=int, default=3)
    gen.add_argument("--records-per-file", type=int, default=500)
    gen.add_argument("--format", dest="record_format", choices=RECORD_FORMATS, default="mixed",
                     help="DynamoDB Streams records, Kinesis Data Streams records, or both")

    run = commands.add_parser("stream", parents=[common], help="stream landing files into the raw tables")
    run.add_argument("--trigger", choices=("available-now", "processing-time"), default="available-now")
    run.add_argument("--interval", default="100 seconds", help="micro-batch interval for processing-time")
    run.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")
    run.add_argument("--max-files-per-trigger", type=int, default=None)

    commands.add_parser("status", parents=[common], help="row counts of raw tables and quarantine reasons")

    demo = commands.add_parser("demo", parents=[common], help="generate -> stream -> counts, from scratch")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--customers", type=int, default=200)
    demo.add_argument("--sink", choices=("auto", "local", "hudi"), default="auto")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
            )
        elif args.command == "status":
            for line in status(layout, contracts_dir=args.contracts_dir).lines():
                print(line)
        else:
            run_demo(layout, seed=args.seed, customers=args.customers, sink=args.sink, contracts_dir=args.contracts_dir)
    except CliError as exc:
        print(f"lakehouse {args.command}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
