"""Freshness: how long a landed file takes to become readable rows of the raw change logs.

The streaming job runs with a processing-time trigger in its own process; this side
drops files into landing at a fixed interval (not a multiple of the trigger, so files
land at every phase of it) and watches the change-log folders for each file's rows, as
every reader lists them (`streaming.io.layout.CHANGE_LOG_FILE_GLOB`): a batch counts
once it is renamed into place, not while it is written in the scratch folder; on the
Hudi sink, once the commit holding it has completed. Each file carries its own key
prefix, so its rows are recognisable whatever batch they land in.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.figures import percentile
from benchmarks.measure import PeakRssSampler, kill_tree, parse_result, start_case
from lakehouse_dbt.hudi_raw import read_hudi_snapshot
from streaming.contracts.loader import load_contracts
from streaming.contracts.model import TableContract
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.timeline import LocalFiles, completed_instants
from streaming.io.layout import DataLayout
from streaming.samples.generator import generate_cdc

# The column of each DynamoDB table that carries the file prefix (the customer id).
KEY_COLUMNS = {"customers": "id", "orders": "customer_id"}


def file_prefix(index: int) -> str:
    return f"f{index:03d}-"


def freshness_lines(index: int, customers: int = 15) -> list[str]:
    """A small, clean CDC file whose customer ids all start with `file_prefix(index)`."""
    cdc = generate_cdc(seed=1000 + index, customers=customers, duplicate_rate=0.0, malformed_rate=0.0)
    return [line.replace('"cust-', f'"{file_prefix(index)}cust-') for line in cdc.records]


@dataclass
class RawWatcher:
    """Remembers when rows with each file prefix first became readable in each change log."""

    raw_dir: Path
    contracts: dict[str, TableContract] = field(default_factory=load_contracts)
    first_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    _read: set[Path] = field(default_factory=set)

    def poll(self) -> None:
        for table, column in KEY_COLUMNS.items():
            change_log = raw_layout.change_log_dir(self.raw_dir, self.contracts[table])
            for path in raw_layout.change_log_files(change_log):
                if path in self._read:
                    continue
                try:
                    keys = pq.read_table(path, columns=[column]).column(column).to_pylist()
                except (OSError, ValueError):
                    continue  # replaced while reading; picked up again next poll
                self._read.add(path)
                self._seen(table, keys)

    def _seen(self, table: str, keys: list[str | None]) -> None:
        now = time.time()
        for key in keys:
            self.first_seen.setdefault(((key or "")[:5], table), now)

    def visible_at(self, index: int) -> float | None:
        times = [self.first_seen.get((file_prefix(index), table)) for table in KEY_COLUMNS]
        return None if None in times else max(times)  # type: ignore[type-var]


@dataclass
class HudiRawWatcher(RawWatcher):
    """The same on the Hudi sink: a change log's rows are readable once their commit has
    completed, so each poll reads every change log as a reader would, through hudi-rs's
    snapshot of the completed commits."""

    def poll(self) -> None:
        for table, column in KEY_COLUMNS.items():
            change_log = raw_layout.change_log_dir(self.raw_dir, self.contracts[table])
            if not completed_instants(LocalFiles(), str(change_log)):
                continue  # no commit of the table has completed yet
            self._seen(table, read_hudi_snapshot(str(change_log), columns=[column]).column(column).to_pylist())


def measure_freshness(work: Path, *, files: int, drop_interval_s: float, trigger_s: int, sink: str = "parquet",
                      timeout_s: float = 600) -> dict[str, Any]:
    # A folder per sink, emptied first: after the Parquet sink's run, a second run in the
    # same data directory would be refused (its raw tables are Parquet), and its ready and
    # stop files would start and stop the next stream at once.
    run_dir = work / f"freshness-{sink}"
    shutil.rmtree(run_dir, ignore_errors=True)
    data_dir = run_dir / "data"
    landing = DataLayout(data_dir).landing / "fresh"
    staged = run_dir / "staged"
    landing.mkdir(parents=True, exist_ok=True)
    staged.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        (staged / f"fresh-{index:03d}.jsonl").write_text("\n".join(freshness_lines(index)) + "\n", encoding="utf-8")
    ready, stop = run_dir / "ready", run_dir / "stop"
    params = {
        "label": "freshness", "data_dir": str(data_dir), "landing_dir": str(DataLayout(data_dir).landing),
        "trigger": "processing-time", "interval": f"{trigger_s} seconds", "sink": sink,
        "ready_file": str(ready), "stop_file": str(stop), "timeout_s": timeout_s,
    }
    log_path = run_dir / "stream.log"
    started = time.monotonic()
    process = start_case("stream", params, log_path=log_path)
    watcher = (HudiRawWatcher if sink == "hudi" else RawWatcher)(DataLayout(data_dir).raw)
    landed_at: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    try:
        with PeakRssSampler(process.pid) as sampler:
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the freshness stream did not start:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.2)
            # The process's start to its ready file: the JVM's start and the stream's start-up.
            startup_s = time.monotonic() - started
            next_drop = time.monotonic()
            while time.monotonic() < deadline:
                if len(landed_at) < files and time.monotonic() >= next_drop:
                    index = len(landed_at)
                    source = staged / f"fresh-{index:03d}.jsonl"
                    now = time.time()
                    os.utime(source, (now, now))
                    os.replace(source, landing / source.name)
                    landed_at[index] = now
                    next_drop += drop_interval_s
                watcher.poll()
                if len(landed_at) == files and all(watcher.visible_at(i) is not None for i in range(files)):
                    break
                time.sleep(0.2)
            stop.touch()
            process.wait(timeout=120)
    finally:
        if process.poll() is None:
            kill_tree(process)
            process.wait()
    latencies = {i: watcher.visible_at(i) - landed for i, landed in landed_at.items()  # type: ignore[operator]
                 if watcher.visible_at(i) is not None}
    values = list(latencies.values())
    stream = parse_result(log_path.read_text()) or {}
    return {
        "sink": sink,
        "files": files,
        "trigger_s": trigger_s,
        "drop_interval_s": drop_interval_s,
        "startup_s": startup_s,
        # Each micro-batch's seconds, as the stream reported them.
        "batch_seconds": stream.get("batch_seconds"),
        "visible_files": len(values),
        "latencies_s": values,
        "p50_s": percentile(values, 50),
        "p95_s": percentile(values, 95),
        "max_s": max(values) if values else None,
        "peak_rss_bytes": sampler.peak,
        "peak_pss_bytes": sampler.peak_pss,
    }
