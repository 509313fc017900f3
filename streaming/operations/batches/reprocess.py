"""`lakehouse reprocess`: rebuild the raw tables in a new location.

Reprocessing never touches the live raw tables: it replays the recorded backfills and
streams the retained landing files (available-now, with a fresh checkpoint) into a new
data root. Readers move only on `lakehouse switch` (switch.py).
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.atomic_files import write_json_atomically
from streaming.errors import OperatorError
from streaming.io.dynamodb_export import ExportValidationError
from streaming.io.layout import DataLayout, change_log_dir, read_pointer
from streaming.io.sinks import SinkName
from streaming.io.sources import local_landing_files
from streaming.operations.batches.backfill import BackfillError, plan_backfill, run_backfill
from streaming.operations.batches.quarantine_replay import repeat_replays
from streaming.operations.batches.recorded_batch import BACKFILLS, QUARANTINE_REPLAYS
from streaming.operations.batches.switch import SwitchError
from streaming.operations.status import StatusReport, status
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import LandingFiles, StreamOptions, load_checked_contracts, start_stream
from streaming.runtime.stream_identity import record_table_batches
from streaming.runtime.stream_loop import refusal_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import Pipeline

log = logging.getLogger(__name__)

Printer = Callable[[str], None]


@dataclass(frozen=True)
class ReprocessPlan:
    data_dir: Path
    landing: Path
    landing_files: tuple[Path, ...]
    backfills: tuple[Mapping[str, Any], ...]
    target: Path

    @property
    def checkpoint(self) -> Path:
        return DataLayout(self.target).checkpoint()

    def describe(self) -> list[str]:
        size = sum(path.stat().st_size for path in self.landing_files)
        live = read_pointer(self.data_dir).data_root
        lines = [f"read  {len(self.landing_files)} landing files ({size} bytes) under {self.landing}"]
        lines += [f"      backfill {run['export_id']} of {run['table']} from {run['export_dir']}"
                  for run in self.backfills]
        replays = QUARANTINE_REPLAYS.succeeded(live)
        if replays:
            lines.append(f"      then repeat {len(replays)} quarantine replay(s) on what the new root quarantines")
        lines += [
            f"write raw tables under {DataLayout(self.target).raw}",
            f"      quarantine {DataLayout(self.target).quarantine}, checkpoint {self.checkpoint} (fresh)",
            f"live  {DataLayout(live).raw} stays untouched; `lakehouse switch --to {self.target}` moves readers",
        ]
        return lines


def plan_reprocess(data_dir: Path, to: Path, from_landing: Path | None = None) -> ReprocessPlan:
    """Check that `to` is a new (or an interrupted reprocess's) location, away from the live data."""
    landing = (from_landing or DataLayout(data_dir).landing).resolve()
    files = tuple(local_landing_files(landing))
    if not files:
        raise SwitchError(f"no landing files under {landing} to reprocess")
    target = to.resolve()
    live = read_pointer(data_dir).data_root.resolve()
    protected_folders = ((live, "the live data root"), (data_dir.resolve(), "the data directory"),
                         (landing, "the landing folder"))
    for protected, what in protected_folders:
        if target == protected or protected.is_relative_to(target):
            raise SwitchError(f"--to {target} would write over {what} {protected}; choose a new location")
        # Inside: the rebuild would sit among the live folders (the stream reading its
        # own output, `demo` clearing it); it belongs beside them.
        if target.is_relative_to(protected):
            raise SwitchError(
                f"--to {target} is inside {what} {protected}; choose a location outside it, "
                f"e.g. {protected.parent / (protected.name + '-reprocessed')}"
            )
    if target.exists() and not target.is_dir():
        raise SwitchError(f"--to {target} is not a folder; choose a new location")
    if target.exists() and not os.access(target, os.R_OK | os.W_OK | os.X_OK):
        raise SwitchError(f"--to {target} cannot be read or written (permission denied); choose a new location")
    marker = DataLayout(target).reprocess_marker
    if target.exists() and any(target.iterdir()) and not marker.is_file():
        raise SwitchError(f"{target} exists and was not made by `lakehouse reprocess`; choose a new location")
    if marker.is_file():
        earlier = json.loads(marker.read_text(encoding="utf-8"))
        if earlier.get("landing") != str(landing):
            raise SwitchError(
                f"{target} is a reprocess of {earlier.get('landing')}, not of {landing}; choose a new location"
            )
    backfills = tuple(BACKFILLS.succeeded(live))
    gone = [run["export_dir"] for run in backfills if not Path(run["export_dir"]).is_dir()]
    if gone:
        raise SwitchError(f"the live tables were backfilled from exports that are gone: {gone}; "
                          "restore them (or re-export) before reprocessing")
    return ReprocessPlan(data_dir, landing, files, backfills, target)


def run_reprocess(
    spark: SparkSession,
    plan: ReprocessPlan,
    contracts: Mapping[str, TableContract],
    options: StreamOptions,
    *,
    out: Printer = print,
) -> float:
    """Replay the backfills, stream the landing files into `plan.target`, then repeat the
    recorded quarantine replays (`streaming.operations.batches.quarantine_replay`); returns seconds.

    The start-up is the stream's (streaming.runtime.startup.start_stream), on the target,
    with the backfills written through its pipeline before the stream starts; its stream
    identity is claimed once the target is marked as this reprocess's. Safe to retry: the
    backfills overwrite their own batch folders, and the stream resumes from the target's
    checkpoint.
    """
    started = time.monotonic()
    target = DataLayout(plan.target)
    marker = {"landing": str(plan.landing), "from_data_dir": str(plan.data_dir.resolve()),
              "started_at": datetime.now(timezone.utc).isoformat()}
    write_json_atomically(target.reprocess_marker, marker)

    def replay_backfills(pipeline: Pipeline) -> None:
        for number, run in enumerate(plan.backfills, start=1):
            out(f"[backfill {number}/{len(plan.backfills)}] {run['export_id']} ({run['table']})")
            backfill = plan_backfill(run["export_dir"], contracts, plan.target, run["table"])
            run_backfill(spark, backfill, pipeline, out=out)
        out(f"{len(plan.landing_files)} landing files into {target.raw} (available-now)")

    stream = start_stream(spark, LandingFiles(target, plan.landing, options), contracts, out,
                          before_stream=replay_backfills)
    record_table_batches(plan.target, contracts)
    # After the stream: a replay repeats only what the new root quarantined as well.
    read_by_target = [*plan.landing_files, *(Path(run["export_dir"]) for run in plan.backfills)]
    repeat_replays(spark, read_pointer(plan.data_dir).data_root, plan.target, stream.pipeline.contracts,
                   stream.pipeline.sink, read_by_target, out=out)
    # A table without rows has no change-log folder, and `switch` accepts only a root
    # with every contracted table: an empty folder says the rebuild found none.
    for contract in contracts.values():
        change_log_dir(target.raw, contract).mkdir(parents=True, exist_ok=True)
    # `switch` accepts only a finished reprocess.
    marker["finished_at"] = datetime.now(timezone.utc).isoformat()
    write_json_atomically(target.reprocess_marker, marker)
    seconds = time.monotonic() - started
    log.info("reprocess of %s into %s finished in %.1fs", plan.landing, plan.target, seconds)
    return seconds


def reprocess(
    layout: DataLayout,
    to: Path,
    *,
    from_landing: Path | None = None,
    sink: SinkName | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    contracts_dir: str | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> StatusReport | None:
    """`lakehouse reprocess`: rebuild every raw table under `to` (backfills, then landing
    files); the live tables stay as they are."""
    from pyspark.errors import StreamingQueryException

    contracts = load_checked_contracts(contracts_dir)
    plan = plan_reprocess(layout.root, to, from_landing)
    if dry_run:
        for line in plan.describe():
            out(line)
        out("dry run: nothing was written")
        return None
    # Named apart from a running stream's query; the checkpoint folder is the stream's.
    options = StreamOptions(sink=sink, max_files_per_trigger=max_files_per_trigger,
                            max_bytes_per_trigger=max_bytes_per_trigger, query_name="reprocess")
    with hold_data_dir(layout.root, "reprocess", report=out):
        # Printed once the lock is held, so that a refused reprocess shows no plan as if it ran.
        for line in plan.describe():
            out(line)
        with session_for(spark, out) as session:
            try:
                seconds = run_reprocess(session, plan, contracts, options, out=out)
            except (StreamingQueryException, BackfillError, ExportValidationError) as exc:
                refusal = refusal_of(options.query_name) if isinstance(exc, StreamingQueryException) else None
                raise OperatorError(
                    f"reprocess stopped (run it again to resume from its checkpoint): {refusal or exc}"
                ) from exc
    rebuilt = status(DataLayout(plan.target), contracts_dir=contracts_dir)
    for line in rebuilt.lines():
        out(line)
    out(f"reprocess finished in {seconds:.1f}s; check it with "
        f"`lakehouse reconcile --source {read_pointer(layout.root).raw_dir} --target {DataLayout(plan.target).raw}`, "
        f"then `lakehouse switch --to {plan.target}`")
    return rebuilt
