"""`lakehouse quarantine replay`: open quarantined records through the pipeline again, exactly once.

Replays are recorded next to the quarantine, under `<data root>/replays/`:

* `<replay-id>.json`, the run log: which quarantined records the replay took, which of
  them landed and which still fail (with their new reason), its batch id and status;
* `<replay-id>/quarantine/_batch_id=<n>/`, the quarantine rows the replay itself
  produced, so a record that fails again is not written into the quarantine twice.

The records are the open ones (streaming/operations/quarantine.py names them, by
`record_id`). Exactly once: a replay is a recorded one-off batch
(streaming/operations/batches/recorded_batch.py), like a backfill: it writes one batch with a
negative batch id of its own, and its run log is written, with that batch id and its
record ids, before anything lands. A replay that did not finish is resumed with the same records and batch
id by the next `replay` (the sink replaces what the interrupted attempt wrote), and a
succeeded replay's landed records are never selected again.

`lakehouse reprocess` repeats the succeeded replays of the live data root in the new
one, after its stream, with the same batch ids: a replayed record is replayed there when
the new root's stream quarantined it too, or never read it (its landing file is gone; on
Glue it came from Kinesis), from the copy each replay keeps in
`<replay-id>/records.jsonl`. A record the new stream already landed (the fix predates the
reprocess) is not landed twice.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from streaming.atomic_files import write_text_atomically
from streaming.io.layout import REPLAY_RECORDS_FILE, DataLayout
from streaming.io.quarantine_rows import QuarantinedRecord
from streaming.io.sinks import SinkName
from streaming.operations.batches.recorded_batch import QUARANTINE_REPLAYS, one_off_batch, recording, run_batch
from streaming.operations.quarantine import QuarantineError, open_records, select_records
from streaming.pipeline import reasons

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import BatchReport, Pipeline, RawSink

Printer = Callable[[str], None]

# Reasons whose quarantine row does not hold the record as it arrived, so a replay could
# only land something else or fail again: what to do instead, per reason.
NOT_REPLAYABLE_REASONS = {
    reasons.INVALID_UTF8: "the payload was stored with its bad bytes replaced; land the record again from its source",
    reasons.UNREADABLE_FILE: "the row holds the read error, not a record; land the object again, complete "
                             "(GZIP or uncompressed), as a new landing file",
    reasons.UNSUPPORTED_COMPRESSION: "the row holds the object's compression, not a record; land the object again "
                                     "as GZIP or uncompressed, as a new landing file",
    reasons.RECORD_TOO_LARGE: "the row keeps only the record's first bytes; no DynamoDB change record is that "
                              "large, so check the source that wrote it",
    # Spark's JSON reader, which a replay decodes with, keeps the last of two values of one
    # name and ignores what follows a complete object: replayed, these would land as if valid.
    reasons.DUPLICATE_KEY: "the record names one field twice and only its source knows which value is right; "
                           "land a corrected record as a new landing file",
    reasons.TRAILING_GARBAGE: "text follows the record's object, so the record is not known to be whole; land it "
                              "again from its source as a new landing file",
}


@dataclass(frozen=True)
class ReplayPlan:
    data_root: Path
    replay_id: str
    batch_id: int
    selection: Mapping[str, Any]
    records: tuple[QuarantinedRecord, ...]
    resumed: bool = False
    # Selected but left out: rows that do not hold their record as it arrived.
    not_replayable: tuple[QuarantinedRecord, ...] = ()

    @property
    def run_log(self) -> Path:
        return QUARANTINE_REPLAYS.path(self.data_root, self.replay_id)

    @property
    def stored_records(self) -> Path:
        """The replayed records themselves, so `reprocess` can repeat the replay after the
        quarantine rows or their landing files are gone."""
        return _stored_records_path(self.data_root, self.replay_id)

    @property
    def own_quarantine_root(self) -> Path:
        """Where the replay's pipeline writes the rows that fail again (`<this>/quarantine/`)."""
        return QUARANTINE_REPLAYS.directory(self.data_root) / self.replay_id

    def describe(self) -> list[str]:
        tables = Counter(row.table or "-" for row in self.records)
        return [
            f"{'resume unfinished' if self.resumed else 'replay'} {self.replay_id}: {len(self.records)} "
            f"quarantined records ({', '.join(f'{t}={n}' for t, n in sorted(tables.items())) or 'none'}) "
            f"as batch {self.batch_id}",
            f"      run log {self.run_log}",
            *self.left_out(),
        ]

    def left_out(self) -> list[str]:
        return [f"      left out {count} record(s) with reason {reason}: {NOT_REPLAYABLE_REASONS[reason]}"
                for reason, count in sorted(Counter(row.reason for row in self.not_replayable).items())]


def plan_replay(
    data_root: Path,
    *,
    reason: str | None = None,
    table: str | None = None,
    batches: Sequence[int] = (),
) -> ReplayPlan:
    """The open records to replay; an unfinished replay is resumed first, as it was."""
    run = QUARANTINE_REPLAYS.interrupted(data_root)
    rows = open_records(data_root)
    if run is not None:
        wanted = set(run["records"])
        by_id = {row.record_id: row for row in rows if row.record_id in wanted}
        missing = wanted - set(by_id)
        if missing:
            raise QuarantineError(
                f"unfinished replay {run['replay_id']} took {len(missing)} record(s) that are no longer in "
                f"{DataLayout(data_root).quarantine}; its batch {run['batch_id']} cannot be repeated as it was"
            )
        return ReplayPlan(data_root, run["replay_id"], run["batch_id"], run["selection"], tuple(by_id.values()),
                          resumed=True)
    selected = select_records(rows, reason=reason, table=table, batches=batches)
    # One record quarantined by several batches (a redelivered file) is replayed once.
    unique = list({row.record_id: row for row in selected}.values())
    replayable = tuple(row for row in unique if row.reason not in NOT_REPLAYABLE_REASONS)
    left_out = tuple(row for row in unique if row.reason in NOT_REPLAYABLE_REASONS)
    replay_id = QUARANTINE_REPLAYS.next_run_id(data_root, sorted(row.record_id for row in replayable))
    selection = {"reason": reason, "table": table, "batches": list(batches)}
    return ReplayPlan(data_root, replay_id, QUARANTINE_REPLAYS.batch_id(replay_id), selection, replayable,
                      not_replayable=left_out)


@dataclass(frozen=True)
class ReplayResult:
    replay_id: str
    batch_id: int
    records: int
    landed: int
    still_quarantined: dict[str, int]  # reason -> records

    def summary(self) -> str:
        failing = sum(self.still_quarantined.values())
        by_reason = ", ".join(f"{reason}={n}" for reason, n in sorted(self.still_quarantined.items()))
        return (f"replay {self.replay_id} batch={self.batch_id}: records={self.records} landed={self.landed} "
                f"still quarantined={failing}" + (f" ({by_reason})" if by_reason else ""))


def run_replay(
    spark: SparkSession,
    plan: ReplayPlan,
    contracts: Mapping[str, TableContract],
    sink: RawSink,
) -> ReplayResult:
    """Run the plan's records through `Pipeline.process_batch` as one batch and record it."""
    identity = {"replay_id": plan.replay_id, "batch_id": plan.batch_id, "selection": dict(plan.selection),
                "records": [row.record_id for row in plan.records],
                "started_at": datetime.now(timezone.utc).isoformat(), "landed": []}
    with recording(plan.run_log, identity) as run:
        _store_records(plan)
        report, quarantined = run_batch(spark, [(row.payload, row.source_ref) for row in plan.records],
                                        plan.batch_id, contracts, sink, plan.own_quarantine_root)
        failing = {row.record_id: row.reason for row in quarantined}
        _check_report(plan, report, failing)
    landed = [row.record_id for row in plan.records if row.record_id not in failing]
    run.succeeded(landed=landed, still_quarantined=failing, finished_at=datetime.now(timezone.utc).isoformat(),
                  landed_rows=report.landed)
    return ReplayResult(plan.replay_id, plan.batch_id, len(plan.records), len(landed),
                        dict(Counter(failing.values())))


def _check_report(plan: ReplayPlan, report: BatchReport, failing: Mapping[str, str]) -> None:
    """Every replayed record either landed or is in the replay's own quarantine, once."""
    if report.records_in != len(plan.records):
        raise QuarantineError(f"replay {plan.replay_id} read {report.records_in} records, "
                              f"expected {len(plan.records)}")
    unknown = set(failing) - {row.record_id for row in plan.records}
    if report.quarantined != len(failing) or unknown:
        raise QuarantineError(
            f"replay {plan.replay_id}: the pipeline quarantined {report.quarantined} rows, but its quarantine "
            f"folder names {len(failing)} replayed records ({len(unknown)} not of this replay)"
        )


def repeat_replays(
    spark: SparkSession,
    live_root: Path,
    target_root: Path,
    contracts: Mapping[str, TableContract],
    sink: RawSink,
    read_by_target: Sequence[Path],
    *,
    out: Printer = print,
) -> list[ReplayResult]:
    """Repeat the live root's succeeded replays in `target_root` (a reprocess), oldest first.

    `read_by_target`: the landing files and export folders the target was built from. A
    replayed record whose source is among them reached the target's own pipeline: it is
    replayed only if the target quarantined it too (landing it again would double it). A
    record from elsewhere (a landing file deleted since, the Kinesis stream on Glue) is
    replayed from the copy the live replay stored. Each replay keeps its id and batch id;
    one already repeated in the target is skipped, so a resumed reprocess repeats it once.
    """
    results = []
    done = {run["replay_id"] for run in QUARANTINE_REPLAYS.succeeded(target_root)}
    read = [path.resolve() for path in read_by_target]
    for run in QUARANTINE_REPLAYS.succeeded(live_root):
        if run["replay_id"] in done:
            continue
        quarantined_here = {row.record_id: row for row in open_records(target_root)}
        stored = _load_stored_records(live_root, run["replay_id"])
        rows = [quarantined_here.get(row.record_id, row) for row in stored
                if row.record_id in quarantined_here or not _read_from(row.source_ref, read)]
        plan = ReplayPlan(target_root, run["replay_id"], run["batch_id"], run["selection"], tuple(rows))
        out(f"[replay {run['replay_id']}] {len(rows)} of its {len(stored)} records did not land here from their "
            "source; replaying them")
        result = run_replay(spark, plan, contracts, sink)
        out(result.summary())
        results.append(result)
    return results


def _read_from(source_ref: str | None, read: Sequence[Path]) -> bool:
    """Whether `source_ref` (a path or a file: URI, as Spark's input_file_name gives) is,
    or lies under, one of `read`."""
    if not source_ref:
        return False
    parsed = urlparse(source_ref)
    if parsed.scheme not in ("", "file"):
        return False
    path = Path(unquote(parsed.path) if parsed.scheme else source_ref).resolve()
    return any(path == source or path.is_relative_to(source) for source in read)


def _store_records(plan: ReplayPlan) -> None:
    write_text_atomically(plan.stored_records, "".join(
        json.dumps({"record_id": row.record_id, "table": row.table, "reason": row.reason,
                    "source_ref": row.source_ref, "payload": row.payload}) + "\n"
        for row in plan.records
    ))


def _stored_records_path(data_root: Path, replay_id: str) -> Path:
    return QUARANTINE_REPLAYS.directory(data_root) / replay_id / REPLAY_RECORDS_FILE


def _load_stored_records(data_root: Path, replay_id: str) -> list[QuarantinedRecord]:
    path = _stored_records_path(data_root, replay_id)
    if not path.is_file():
        raise QuarantineError(f"replay {replay_id} of {data_root} has no stored records ({path}); "
                              "it cannot be repeated")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stored = json.loads(line)
        rows.append(QuarantinedRecord(stored["record_id"], stored["table"], stored["reason"], stored["payload"],
                                      stored["source_ref"], None, 0))
    return rows


# --------------------------------------------------------------------------- `lakehouse quarantine replay`


@dataclass(frozen=True)
class QuarantineReplay:
    """`lakehouse quarantine replay` as a one-off batch (recorded_batch.OneOffBatch): the
    open records selected, or an unfinished replay's."""

    reason: str | None
    table: str | None
    batches: Sequence[int]

    command = "quarantine replay"
    reads_existing_data = True
    errors = (QuarantineError,)

    def plan(self, target: DataLayout, contracts: Mapping[str, TableContract]) -> ReplayPlan:
        return plan_replay(target.root, reason=self.reason, table=self.table, batches=self.batches)

    def nothing_to_do(self, plan: ReplayPlan) -> list[str]:
        return [] if plan.records else [*plan.left_out(), "nothing to replay"]

    def describe(self, plan: ReplayPlan) -> list[str]:
        return plan.describe()

    def written_contracts(
        self, plan: ReplayPlan, contracts: Mapping[str, TableContract]
    ) -> Mapping[str, TableContract]:
        """Every contract: a quarantined record may be of any table, or name one it is not of."""
        return contracts

    def retry_heading(self, plan: ReplayPlan) -> str:
        return f"replay failed (run replay again: it resumes batch {plan.batch_id})"

    def run(self, spark: SparkSession, plan: ReplayPlan, pipeline: Pipeline, out: Printer) -> ReplayResult:
        result = run_replay(spark, plan, pipeline.contracts, pipeline.sink)
        out(result.summary())
        return result


def quarantine_replay(
    layout: DataLayout,
    *,
    reason: str | None = None,
    table: str | None = None,
    batches: Sequence[int] = (),
    sink: SinkName | None = None,
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> ReplayResult | None:
    """`lakehouse quarantine replay`: open quarantined records through the pipeline again,
    exactly once; None when nothing is open."""
    return one_off_batch(layout, QuarantineReplay(reason, table, batches), sink=sink, contracts_dir=contracts_dir,
                         spark=spark, out=out)
