"""A recorded one-off batch: what a backfill, a quarantine replay and an unrouted replay share.

Each of them writes one batch beside the stream, through the stream's own
`Pipeline.process_batch`, and records the run so that an interrupted one is finished
rather than half kept. This module owns that shared part; each operation keeps its plan
(what the batch reads) and its checks (what must add up afterwards).

* The run log: `<data root>/<folder>/<run id>.json`, one folder per kind of operation
  (named in streaming.io.layout). It is written as "running", with the run's identity,
  before anything lands; then as "failed" with the error, or "succeeded" with what the
  run did (`recording`).
* The batch id (`operation_batch_id`): negative, so it never meets a stream batch (those
  start at 0), and derived from the run alone, so a retry writes, and so replaces, the
  very batch folders and commit markers the interrupted attempt wrote.
* Resume: `RunLog.interrupted` is the oldest run not recorded as succeeded. A replay
  finishes it, with the same records and batch id, before it selects anything new; a
  backfill is finished by running it again, its batch id being its export's.
* The envelope of rows already in hand, and their run through the pipeline with what
  it quarantined read back (`run_batch`); a backfill builds its envelope from staged
  files and publishes its own way, so it uses the run log and batch id only.
* `unfinished_operations`: a warning for each run of any kind that has not succeeded,
  which `lakehouse status` prints.
* The entry, `one_off_batch`: the steps every one-off batch's command takes, in this
  order, over what its kind says (`OneOffBatch`: backfill.ExportBackfill,
  quarantine_replay.QuarantineReplay, unrouted_replay.UnroutedReplay):

  1. a replay refuses a data directory that does not exist (a backfill may be its first write);
  2. the contracts, loaded and checked;
  3. the data directory's lock, held to the end, so that no stream or other batch writes
     beside this one;
  4. the plan, made under the lock: another run could change what is left to do (a
     backfill's dry run makes it alone, without the lock, and stops there);
  5. a plan that writes nothing says why, and the command stops;
  6. the contracts against the versions the raw tables were written with: an addition
     is reported, a rename or a type change refused;
  7. the plan, printed after the refusals, so that a refused batch shows none as if it had run;
  8. the Spark session (the caller's, or a new one stopped at the end);
  9. the stream's pipeline (startup.local_pipeline) for the raw tables the batch may write,
     its stream id the command's: with the batch's own id, a sink's commit marker
     `<stream id>:<batch id>` lets a retry skip the tables already committed;
  10. the run, whose error says how to run the batch again (`explaining_retry`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from streaming.atomic_files import read_json_records, write_json_atomically
from streaming.io.layout import (
    BACKFILLS_FOLDER,
    QUARANTINE_REPLAYS_FOLDER,
    UNROUTED_REPLAYS_FOLDER,
    DataLayout,
    require_data_dir,
)
from streaming.io.quarantine_rows import QuarantinedRecord, read_quarantine_folder
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sinks import SinkName
from streaming.pipeline.batch import Clock, Pipeline, utc_now
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import check_contract_changes, load_checked_contracts, local_pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import BatchReport, RawSink

Printer = Callable[[str], None]
Run = Mapping[str, Any]
# 2**62 keeps -(run id) inside a signed bigint with room to spare.
_RUN_ID_SPACE = 2**62


def operation_batch_id(kind: str, run_id: str) -> int:
    """The batch id of run `run_id` of an operation of `kind`: negative, and the same on
    every retry of that run."""
    digest = hashlib.sha256(f"{kind}:{run_id}".encode()).digest()
    return -(1 + int.from_bytes(digest[:8], "big") % _RUN_ID_SPACE)


# --------------------------------------------------------------------------- run logs


@dataclass(frozen=True)
class RunLog:
    """The recorded runs of one kind of operation under a data root."""

    # Keeps the batch ids of different operations apart (operation_batch_id).
    kind: str
    folder: str
    # What a run that has not succeeded may have left behind, and how to finish it.
    unfinished_warning: Callable[[Run], str]

    def directory(self, data_root: Path) -> Path:
        return data_root / self.folder

    def path(self, data_root: Path, run_id: str) -> Path:
        return self.directory(data_root) / f"{run_id}.json"

    def batch_id(self, run_id: str) -> int:
        return operation_batch_id(self.kind, run_id)

    def runs(self, data_root: Path) -> list[dict[str, Any]]:
        """Every recorded run, oldest first (a log without a start time, first of all)."""
        return sorted(read_json_records(self.directory(data_root)), key=lambda run: run.get("started_at", ""))

    def succeeded(self, data_root: Path) -> list[dict[str, Any]]:
        return [run for run in self.runs(data_root) if run.get("status") == "succeeded"]

    def not_succeeded(self, data_root: Path) -> list[dict[str, Any]]:
        """Runs that failed, or are recorded as running: still running, or killed before they finished."""
        return [run for run in self.runs(data_root) if run.get("status") != "succeeded"]

    def interrupted(self, data_root: Path) -> dict[str, Any] | None:
        """The oldest run that failed or was stopped while running: its batch may be partly
        written, so it is finished, as it was, before another starts."""
        return next(iter(self.not_succeeded(data_root)), None)

    def next_run_id(self, data_root: Path, taken: Iterable[str]) -> str:
        """A new run's id: its number among the recorded runs, then a digest of the ids
        of what it takes, so that the id alone says which run it is and what it read."""
        digest = hashlib.sha256("\n".join(taken).encode()).hexdigest()
        return f"{len(self.runs(data_root)) + 1:04d}-{digest[:12]}"

    def unfinished(self, data_root: Path) -> list[str]:
        return [self.unfinished_warning(run) for run in self.not_succeeded(data_root)]


def _still_running(run: Run) -> str:
    return " (still running, or stopped before it finished)" if run.get("status") == "running" else ""


def _unfinished_backfill(run: Run) -> str:
    return (
        f"backfill of export {run.get('export_id')} into {run.get('table')} is recorded as {run.get('status')}"
        f"{_still_running(run)}; raw may hold none or part of it. Run it again: lakehouse backfill "
        f"--export {run.get('export_dir')} --table {run.get('table')}"
    )


def _unfinished_quarantine_replay(run: Run) -> str:
    return (
        f"quarantine replay {run['replay_id']} of {len(run['records'])} records is recorded as {run['status']}"
        f"{_still_running(run)}; raw may hold some of them although the quarantine still counts them as open. "
        "Run `lakehouse quarantine replay` again: it finishes that replay first"
    )


def _unfinished_unrouted_replay(run: Run) -> str:
    return (
        f"unrouted replay {run['replay_id']} of {', '.join(run['tables'])} is recorded as {run['status']}; "
        "its items may be current both in an entity and in the unrouted table. Run `lakehouse unrouted replay` "
        "again: it finishes that replay first"
    )


# The export id is the run id of a backfill, so "dynamodb-export" names its batch ids.
BACKFILLS = RunLog("dynamodb-export", BACKFILLS_FOLDER, _unfinished_backfill)
QUARANTINE_REPLAYS = RunLog("quarantine-replay", QUARANTINE_REPLAYS_FOLDER, _unfinished_quarantine_replay)
UNROUTED_REPLAYS = RunLog("unrouted-replay", UNROUTED_REPLAYS_FOLDER, _unfinished_unrouted_replay)


def unfinished_operations(data_root: Path) -> list[str]:
    """A warning for every recorded run of every operation that has not succeeded."""
    return [warning for run_log in (BACKFILLS, QUARANTINE_REPLAYS, UNROUTED_REPLAYS)
            for warning in run_log.unfinished(data_root)]


@dataclass(frozen=True)
class RecordedRun:
    """A run whose log says "running"; the operation records how it ended."""

    path: Path
    identity: Mapping[str, Any]

    def succeeded(self, **outcome: Any) -> None:
        write_json_atomically(self.path, {**self.identity, "status": "succeeded", **outcome})

    def forget(self) -> None:
        """Remove the log of a run that changed nothing, so the next run reads the same input."""
        self.path.unlink()


@contextmanager
def recording(path: Path, identity: Mapping[str, Any]) -> Iterator[RecordedRun]:
    """Log the run as running before anything of it is written, and as failed, with the
    error, when the block raises. `identity` is what a resume needs to repeat the run."""
    write_json_atomically(path, {**identity, "status": "running"})
    try:
        yield RecordedRun(path, identity)
    except Exception as exc:
        write_json_atomically(path, {**identity, "status": "failed", "error": str(exc)})
        raise


@contextmanager
def explaining_retry(error: type[Exception], heading: str, *also: type[Exception]) -> Iterator[None]:
    """Re-raise `error` (and `also`) as `error`, headed by what running it again does:
    the operator's next step is the same whichever check failed."""
    try:
        yield
    except (error, *also) as exc:
        raise error(f"{heading}: {exc}") from exc


# --------------------------------------------------------------------------- the batch


def rows_envelope(spark: SparkSession, records: Sequence[tuple[str | None, str | None]]) -> DataFrame:
    """`(payload, source_ref)` pairs as the change envelope, with no Kinesis sequence number:
    a replayed record is read from where it was kept, not from the stream."""
    from streaming.pipeline.envelope import ENVELOPE_SCHEMA

    # Rows given by name: the schema fixes the order, and leaves the sequence number null.
    return spark.createDataFrame([{"payload": payload, "source_ref": source_ref} for payload, source_ref in records],
                                 ENVELOPE_SCHEMA)


def run_batch(
    spark: SparkSession,
    records: Sequence[tuple[str | None, str | None]],
    batch_id: int,
    contracts: Mapping[str, TableContract],
    sink: RawSink,
    quarantine_root: Path,
    clock: Clock = utc_now,
) -> tuple[BatchReport, list[QuarantinedRecord]]:
    """Decode `records` (payload, source_ref) as batch `batch_id`, landing them through
    `sink` and quarantining under `quarantine_root`; returns the batch's report and the
    quarantine rows it wrote, for the operation's checks."""
    # A record of a KEYS_ONLY or OLD_IMAGE stream kept from before such streams were refused
    # fails again as missing_new_image, instead of failing every later run.
    pipeline = Pipeline(contracts, sink, QuarantineWriter(str(quarantine_root)), clock=clock,
                        refuse_unusable_view_types=False)
    report = pipeline.process_batch(rows_envelope(spark, records), batch_id)
    quarantined = [row for row in read_quarantine_folder(DataLayout(quarantine_root).quarantine)
                   if row.batch_id == batch_id]
    return report, quarantined


# --------------------------------------------------------------------------- the entry

PlanT = TypeVar("PlanT")
ResultT = TypeVar("ResultT")


class OneOffBatch(Protocol[PlanT, ResultT]):
    """One kind of one-off batch: what it reads and how it runs, all that differs between
    the kinds. The steps in between are `one_off_batch`'s."""

    # The `lakehouse` command: the data directory's lock names it, and, hyphenated, it is
    # the stream id the raw sink marks the batch's commits with.
    command: str
    # A replay reads what the data directory holds; a backfill may be its first write.
    reads_existing_data: bool
    # What the operation raises, then the other errors a run may end in: each is raised as
    # the first, headed by how to run the batch again.
    errors: tuple[type[Exception], ...]

    def plan(self, target: DataLayout, contracts: Mapping[str, TableContract]) -> PlanT: ...

    def nothing_to_do(self, plan: PlanT) -> list[str]:
        """Why the plan writes nothing, or no line when it writes something."""

    def describe(self, plan: PlanT) -> list[str]: ...

    def written_contracts(self, plan: PlanT, contracts: Mapping[str, TableContract]) -> Mapping[str, TableContract]:
        """The raw tables the batch may write: its pipeline decodes for these alone."""

    def retry_heading(self, plan: PlanT) -> str: ...

    def run(self, spark: SparkSession, plan: PlanT, pipeline: Pipeline, out: Printer) -> ResultT: ...


def one_off_batch(
    layout: DataLayout,
    batch: OneOffBatch[PlanT, ResultT],
    *,
    sink: SinkName | None,
    contracts_dir: str | None,
    spark: SparkSession | None,
    out: Printer,
) -> ResultT | None:
    """Steps 1-10 of `batch` (module docstring); None when its plan writes nothing."""
    if batch.reads_existing_data:
        require_data_dir(layout.root)
    contracts = load_checked_contracts(contracts_dir)
    target = layout.active()
    with hold_data_dir(layout.root, batch.command, report=out):
        plan = batch.plan(target, contracts)
        nothing_to_do = batch.nothing_to_do(plan)
        if nothing_to_do:
            for line in nothing_to_do:
                out(line)
            return None
        check_contract_changes(target.raw, contracts, out)
        for line in batch.describe(plan):
            out(line)
        with session_for(spark, out) as session:
            pipeline = local_pipeline(session, target, batch.written_contracts(plan, contracts), sink,
                                      stream_id=batch.command.replace(" ", "-"))
            error, *also = batch.errors
            with explaining_retry(error, batch.retry_heading(plan), *also):
                return batch.run(session, plan, pipeline, out)
