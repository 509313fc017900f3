"""Benchmark and drill cases, each run in its own process: `python -m benchmarks.cases <case> <json>`.

A case starts its own SparkSession (or dbt), does one measured piece of work and prints
`RESULT <json>`. Timings taken here exclude the JVM start-up, so the job and the plain
copy are compared on the work alone; the caller measures memory and wall time outside.

`BENCH_KILL_AT=<batch_id>:<phase>` makes the `stream` case SIGKILL its own process group
(the Python driver and its JVM) at a point of that micro-batch, for the kill drill:
`before_write` (decoded, nothing written), `mid_write` (the first table's change log
written, the other not), `after_write` (everything written, checkpoint commit not yet done).

With the Hudi sink (`"sink": "hudi"`), each raw table's write is two Hudi commits, the
change log's then the current state's, and `<batch_id>:<phase>:<n>` names the batch's
n-th Hudi commit (0: the first table's change log, 1: its current state, 2: the next
table's change log, ...): `hudi_after_commit` kills once commit n completed, before the
next one starts (n even: between a table's change log and its current state);
`hudi_inflight` kills while commit n is in flight, as soon as its `.inflight` instant is
on the timeline; `hudi_files` kills while it is in flight with its first data file
written (both in the table's folder, the commit not completed).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
from pyspark.sql import DataFrame, SparkSession

from benchmarks.measure import RESULT_PREFIX, tree_cpu_seconds
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.contracts.model import TableContract
from streaming.io.layout import HUDI_TIMELINE_FOLDER, QUERY_NAME, DataLayout
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.pipeline.batch import BatchReport, RawSink

KILL_ENV = "BENCH_KILL_AT"
KILL_PHASES = ("before_write", "mid_write", "after_write")
HUDI_KILL_PHASES = ("hudi_after_commit", "hudi_inflight", "hudi_files")
# How often the in-flight watcher looks at the table's folder.
WATCH_INTERVAL_S = 0.005


def _session(params: dict[str, Any]) -> SparkSession:
    from streaming.runtime.spark_session import local_session

    extra = {"spark.driver.memory": params["driver_memory"]} if params.get("driver_memory") else {}
    return local_session(
        app_name=f"bench-{params.get('label', 'case')}",
        master=params.get("master", "local[2]"),
        shuffle_partitions=int(params.get("shuffle_partitions", 4)),
        extra_conf=extra,
    )


def _kill_own_process_group() -> None:
    sys.stdout.flush()
    os.killpg(os.getpgrp(), signal.SIGKILL)


class KillPlan:
    """Counts sink writes (and Hudi commits) per batch and kills the process at the planned one."""

    def __init__(self, spec: str | None) -> None:
        self.batch_id: int | None = None
        self.phase: str | None = None
        self.commit: int = 0
        if spec:
            batch, phase, *commit = spec.split(":")
            if phase not in (*KILL_PHASES, *HUDI_KILL_PHASES):
                raise ValueError(f"{KILL_ENV} phase must be one of {KILL_PHASES + HUDI_KILL_PHASES}, got {phase!r}")
            self.batch_id, self.phase = int(batch), phase
            self.commit = int(commit[0]) if commit else 0
        self._raw_writes: dict[int, int] = {}
        self._hudi_commits: dict[int, int] = {}
        self.current_batch: int | None = None

    def before_raw_write(self, batch_id: int) -> None:
        self.current_batch = batch_id
        writes = self._raw_writes.get(batch_id, 0)
        if batch_id == self.batch_id and (
            (self.phase == "before_write" and writes == 0) or (self.phase == "mid_write" and writes == 1)
        ):
            _kill_own_process_group()
        self._raw_writes[batch_id] = writes + 1

    def after_quarantine_write(self, batch_id: int) -> None:
        if batch_id == self.batch_id and self.phase == "after_write":
            _kill_own_process_group()

    def hudi_commit(self, commit: Callable[[], None], table_path: str) -> None:
        """Run one Hudi commit of the current batch, killing the process around or inside it as planned."""
        batch_id = self.current_batch
        number = self._hudi_commits.get(batch_id, 0) if batch_id is not None else -1
        if batch_id is not None:
            self._hudi_commits[batch_id] = number + 1
        planned = batch_id == self.batch_id and number == self.commit
        if planned and self.phase in ("hudi_inflight", "hudi_files"):
            _start_inflight_watcher(Path(table_path), files=self.phase == "hudi_files")
        commit()
        if planned and self.phase == "hudi_after_commit":
            _kill_own_process_group()


def _pending_instants(timeline: Path) -> set[str]:
    """Instant times with an `.inflight` file and no completed instant (Hudi table version 6)."""
    try:
        names = os.listdir(timeline)
    except OSError:
        return set()
    # A commit's: `<t>.inflight`, `<t>.deltacommit.inflight`, `<t>.replacecommit.inflight`
    # (not a rollback's or a clean's).
    inflight = {name.split(".", 1)[0] for name in names
                if name.endswith(".inflight") and name.count(".") == 1 or
                name.endswith((".deltacommit.inflight", ".replacecommit.inflight"))}
    completed = {name.split(".", 1)[0] for name in names
                 if name.count(".") == 1 and name.split(".", 1)[1] in ("commit", "deltacommit", "replacecommit")}
    return inflight - completed


def _has_data_file(table: Path, instant: str) -> bool:
    """A base or log file of `instant` written under the table (Hudi puts the instant in its name)."""
    for root, folders, files in os.walk(table):
        folders[:] = [folder for folder in folders if folder != HUDI_TIMELINE_FOLDER]
        if any(instant in name and (name.endswith(".parquet") or ".log." in name) for name in files):
            return True
    return False


def _start_inflight_watcher(table: Path, *, files: bool) -> None:
    """Kill the process group while a new commit of `table` is in flight (with a data file
    written when `files`); a commit that completes first is left alone and the kill missed."""
    timeline = table / HUDI_TIMELINE_FOLDER
    before = _pending_instants(timeline)

    def watch() -> None:
        while True:
            for instant in _pending_instants(timeline) - before:
                if not files or _has_data_file(table, instant):
                    _kill_own_process_group()
            time.sleep(WATCH_INTERVAL_S)

    threading.Thread(target=watch, name="kill-drill-inflight-watcher", daemon=True).start()


class KillableSink:
    def __init__(self, inner: RawSink, plan: KillPlan) -> None:
        self.inner = inner
        self.plan = plan
        # The wrapped sink's capabilities (the pipeline caches a batch's changes or not as
        # it reads them, and stages tables when it does), but a planned kill names a write
        # by its order, so the writes then run one by one.
        self.capabilities = replace(inner.capabilities, writes_tables_concurrently=(
            inner.capabilities.writes_tables_concurrently and plan.batch_id is None))
        # The Hudi sink's commits go through its writer: wrapped, a planned kill can land
        # between a table's two commits or inside one.
        if plan.phase in HUDI_KILL_PHASES and hasattr(inner, "_writer"):
            commit = inner._writer

            def planned_writer(frame: DataFrame, options: Any, path: str) -> None:
                plan.hudi_commit(lambda: commit(frame, options, path), path)

            inner._writer = planned_writer

        # A sink that stages its tables (the local change log) makes them visible one
        # publish at a time: the planned raw-write kills fall on those, where a reader
        # would first see part of a batch; staging itself leaves nothing visible.
        if inner.capabilities.stages_tables:
            self.stage, self.discard = inner.stage, inner.discard
            self.publish = self._publish

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        self.plan.before_raw_write(batch_id)
        self.inner.write(changes, contract, batch_id, rows)

    def _publish(self, spark: SparkSession, staged: Any) -> None:
        self.plan.before_raw_write(staged.batch_id)
        self.inner.publish(spark, staged)


class KillableQuarantine(QuarantineWriter):
    def __init__(self, root: str, plan: KillPlan) -> None:
        super().__init__(root)
        self.plan = plan

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        super().write(df, batch_id, rows)
        self.plan.after_quarantine_write(batch_id)


class RecordingPublisher:
    """A metrics publisher keeping each batch's report for the benchmark."""

    def __init__(self) -> None:
        self.reports: list[BatchReport] = []

    def publish(self, report: BatchReport) -> None:
        self.reports.append(report)


def run_stream_job(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """landing -> decode -> order -> quarantine split -> local sink, as `lakehouse stream` runs it.

    Params: `data_dir`, `landing_dir`, optional `sink` (`parquet`, the default, or
    `hudi`), `contracts_dir` (default: the sample tables', which the generator writes), `max_files_per_trigger`, `max_bytes_per_trigger`, `trigger`
    (`available-now` or `processing-time` with `interval`, `ready_file`, `stop_file`,
    `timeout_s`). Returns the query's seconds and the per-batch reports' figures.
    """
    from streaming.runtime.data_lock import hold_data_dir
    from streaming.runtime.startup import LandingFiles, StreamOptions, load_checked_contracts, start_stream

    landing = Path(params["landing_dir"])
    query_name = params.get("query_name", QUERY_NAME)
    trigger = params.get("trigger", "available-now")
    options = StreamOptions(trigger=trigger, interval=params.get("interval", "10 seconds"),
                            sink=params.get("sink", "parquet"),
                            max_files_per_trigger=params.get("max_files_per_trigger"),
                            max_bytes_per_trigger=params.get("max_bytes_per_trigger"),
                            query_name=query_name, checkpoint_name=query_name)
    plan = KillPlan(os.environ.get(KILL_ENV))
    recorder = RecordingPublisher()

    def killable(raw_sink: RawSink, quarantine: QuarantineWriter) -> tuple[RawSink, QuarantineWriter]:
        return KillableSink(raw_sink, plan), KillableQuarantine(quarantine.root, plan)

    driver = psutil.Process()
    cpu_before = tree_cpu_seconds(driver)
    started = time.monotonic()
    # `lakehouse stream`'s start-up (streaming/runtime/startup.py), so that the kill
    # drill's restarts pass through every check an operator's restart would.
    # It holds the data directory's lock as `lakehouse stream` does (the kill drill's
    # second writer is refused by it; a killed run's record is taken over on restart).
    with hold_data_dir(Path(params["data_dir"]), "stream", report=print):
        stream = start_stream(spark, LandingFiles(DataLayout(Path(params["data_dir"])), landing, options),
                              load_checked_contracts(params.get("contracts_dir", SAMPLE_CONTRACTS_DIR)), print,
                              metrics=recorder, wrap_sinks=killable)
        query, size = stream.query, stream.source.trigger_size
        if trigger == "processing-time":
            Path(params["ready_file"]).touch()
            deadline = time.monotonic() + float(params.get("timeout_s", 600))
            stop_file = Path(params["stop_file"])
            while not stop_file.exists() and time.monotonic() < deadline:
                query.awaitTermination(0.5)
            query.stop()
    landed_by_table: dict[str, int] = {}
    for report in recorder.reports:
        for table, rows in report.landed.items():
            landed_by_table[table] = landed_by_table.get(table, 0) + rows
    return {
        "seconds": time.monotonic() - started,
        # The driver's and its JVM's CPU time over the run (the JVM started before it).
        "cpu_seconds": tree_cpu_seconds(driver) - cpu_before,
        "records_in": sum(report.records_in for report in recorder.reports),
        "landed": sum(landed_by_table.values()),
        "landed_by_table": landed_by_table,
        "quarantined": sum(report.quarantined for report in recorder.reports),
        "duplicates_dropped": sum(report.duplicates_dropped for report in recorder.reports),
        "batch_seconds": [report.seconds for report in recorder.reports],
        "batch_records": [report.records_in for report in recorder.reports],
        "files_per_trigger": size.files,
    }


def run_copy(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """The baseline: read the same landing files, write Parquet, nothing else. `format`:
    `json` (read.json, which infers the schema in a first pass over the files),
    `json-schema` (read.json given that schema, inferred before the clock starts: the
    stricter floor, one pass), or `text` (lines, no parsing)."""
    def reader():
        return spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.jsonl")

    schema = reader().json(params["landing_dir"]).schema if params["format"] == "json-schema" else None
    started = time.monotonic()
    if params["format"] == "json":
        frame = reader().json(params["landing_dir"])
    elif params["format"] == "json-schema":
        frame = reader().schema(schema).json(params["landing_dir"])
    elif params["format"] == "text":
        frame = reader().text(params["landing_dir"])
    else:
        raise ValueError(f"copy format must be text, json or json-schema, not {params['format']!r}")
    frame.write.mode("overwrite").parquet(params["out_dir"])
    return {"seconds": time.monotonic() - started}


def run_stages(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.stages import profile_stages

    return profile_stages(spark, params)


def run_hudi_writes(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.stages import profile_hudi_writes

    return profile_hudi_writes(spark, params)


def run_hudi_tables(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.hudi_tables import measure_table_count

    return measure_table_count(spark, params)


def run_seed(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.seed_job import run_seed_job

    return run_seed_job(spark, params)


def _with_session(work: Callable[[SparkSession, dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def case(params: dict[str, Any]) -> dict[str, Any]:
        spark = _session(params)
        try:
            return work(spark, params)
        finally:
            spark.stop()

    return case


def dbt_case(params: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.dbt_bench import incremental_vs_full_refresh

    return incremental_vs_full_refresh(Path(params["data_dir"]), int(params["rows"]), params.get("new_rows"))


def dbt_build_case(params: dict[str, Any]) -> dict[str, Any]:
    """One dbt command on a data directory (the drill kills it midway)."""
    from streaming.runtime.dbt_runner import run_dbt

    result = run_dbt(list(params["args"]), params["data_dir"])
    return {"success": bool(result.success)}


CASES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "stream": _with_session(run_stream_job),
    "copy": _with_session(run_copy),
    "stages": _with_session(run_stages),
    "hudi_writes": _with_session(run_hudi_writes),
    "hudi_tables": _with_session(run_hudi_tables),
    "seed_job": _with_session(run_seed),
    "dbt": dbt_case,
    "dbt_build": dbt_build_case,
}


def main(argv: list[str]) -> int:
    case, params = argv[0], json.loads(argv[1])
    result = CASES[case](params)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
