"""`lakehouse quarantine`: what the quarantine holds, a PII-aware look at it, and replay.

The quarantine (`<data root>/quarantine/_batch_id=<n>/*.parquet`, written by
`streaming.io.sinks.QuarantineWriter`) is never edited here: it stays the record of what
arrived and why it was refused. Replays are recorded next to it, under
`<data root>/replays/`:

* `<replay-id>.json`, the run log: which quarantined records the replay took, which of
  them landed and which still fail (with their new reason), its batch id and status;
* `<replay-id>/quarantine/_batch_id=<n>/`, the quarantine rows the replay itself
  produced, so a record that fails again is not written into the quarantine twice.

A quarantined record is identified by `record_id`, the SHA-256 of its `source_ref` and
its payload text: the same bytes from the same source are the same record, whichever
stream batch (or Spark retry of it) quarantined them. A record is open while no
succeeded replay landed it; `summary`, `show` and `replay` only consider open records.

Exactly once: a replay is a recorded one-off batch
(streaming/operations/recorded_batch.py), like a backfill: it writes one batch with a
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
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lakehouse_dbt.pii_key import key_of_data_dir, pseudonym
from streaming.atomic_files import write_text_atomically
from streaming.contracts.model import AttributeSpec, TableContract
from streaming.errors import OperatorError
from streaming.io.layout import REPLAY_RECORDS_FILE, DataLayout, require_data_dir
from streaming.io.quarantine_rows import QuarantinedRecord, read_quarantine_folder
from streaming.io.sinks import SinkName
from streaming.operations.recorded_batch import QUARANTINE_REPLAYS, explaining_retry, recording, run_batch
from streaming.pipeline import reasons
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import check_contract_changes, load_checked_contracts, local_pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.pipeline.batch import BatchReport, RawSink

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


class QuarantineError(OperatorError, RuntimeError):
    """A quarantine command cannot run, or a replay's result does not add up."""


# --------------------------------------------------------------------------- reading


def open_records(data_root: Path) -> list[QuarantinedRecord]:
    """Quarantine rows whose record no succeeded replay has landed."""
    resolved = landed_record_ids(data_root)
    return [row for row in read_quarantine_folder(DataLayout(data_root).quarantine) if row.record_id not in resolved]


def matches_reason(reason: str, wanted: str) -> bool:
    """`missing_key` selects `missing_key:<attr>`; a full reason selects only itself."""
    return reason == wanted or reason.startswith(f"{wanted}:")


def select_records(
    rows: Iterable[QuarantinedRecord],
    *,
    reason: str | None = None,
    table: str | None = None,
    batches: Sequence[int] = (),
) -> list[QuarantinedRecord]:
    return [
        row for row in rows
        if (reason is None or matches_reason(row.reason, reason))
        and (table is None or row.table == table)
        and (not batches or row.batch_id in batches)
    ]


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class QuarantineSummary:
    # (table or "-", reason, UTC day of ingestion) -> open rows
    open_rows: dict[tuple[str, str, str], int]
    resolved_rows: int
    replays: int

    def lines(self) -> list[str]:
        total = sum(self.open_rows.values())
        if not self.open_rows:
            out = ["quarantine: no open records"]
        else:
            keys = sorted(self.open_rows)
            widths = [max(len(header), *(len(key[i]) for key in keys))
                      for i, header in enumerate(("table", "reason", "day"))]
            out = [f"{'table':<{widths[0]}}  {'reason':<{widths[1]}}  {'day':<{widths[2]}}  {'rows':>6}"]
            out += [f"{t:<{widths[0]}}  {r:<{widths[1]}}  {d:<{widths[2]}}  {self.open_rows[(t, r, d)]:>6}"
                    for t, r, d in keys]
            out.append(f"open: {total} rows")
        if self.replays:
            out.append(f"landed by {self.replays} replay(s): {self.resolved_rows} rows (not counted above)")
        return out + what_to_do({reason for _, reason, _ in self.open_rows})


def what_to_do(found: Iterable[str]) -> list[str]:
    """A line for each of `found` (reasons) that `reasons.WHAT_TO_DO` advises on."""
    return [f"{reason}: {reasons.WHAT_TO_DO[reason]}" for reason in sorted(set(found)) if reason in reasons.WHAT_TO_DO]


def summarize(data_root: Path) -> QuarantineSummary:
    rows = read_quarantine_folder(DataLayout(data_root).quarantine)
    resolved = landed_record_ids(data_root)
    open_rows = Counter(
        (row.table or "-", row.reason, row.day.isoformat() if row.day else "-")
        for row in rows if row.record_id not in resolved
    )
    return QuarantineSummary(
        dict(open_rows),
        sum(1 for row in rows if row.record_id in resolved),
        len(QUARANTINE_REPLAYS.succeeded(data_root)),
    )


# --------------------------------------------------------------------------- PII-aware show

MASK = "***"
# Marks a pseudonym in `show` output, so it is never taken for a clear value.
PSEUDONYM_PREFIX = "pii:"


@dataclass(frozen=True)
class PiiMasker:
    """Hides the values of PII attributes in a quarantined payload.

    `pii_labels` maps a DynamoDB attribute name flagged `pii: true` in any contract (at
    any depth: M fields too) to its column name. Any contract, because a quarantined
    record's table may be unknown or wrong. With `key`, a scalar S or N value becomes
    `pii:<hex HMAC-SHA-256(key, "<column>:<text>")>`, the marts' pseudonym scheme
    (macros/pii/pseudonymize.sql), so equal values can be correlated without being
    shown; any other value, and every value without a key, becomes `***`.
    """

    pii_labels: Mapping[str, str]
    key: bytes | None = None
    _pattern: re.Pattern[str] | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        if self.pii_labels:
            names = "|".join(re.escape(json.dumps(name)[1:-1]) for name in sorted(self.pii_labels, key=len,
                                                                                   reverse=True))
            object.__setattr__(self, "_pattern", re.compile(rf'"({names})"\s*:\s*'))

    def mask_value(self, name: str, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            (descriptor, inner), = value.items()
            if descriptor in ("S", "N") and isinstance(inner, str):
                return {descriptor: self._hidden(name, inner)}
            if descriptor == "NULL":
                return value
        return MASK

    def _hidden(self, name: str, text: str) -> str:
        if self.key is None:
            return MASK
        return PSEUDONYM_PREFIX + pseudonym(self.key, self.pii_labels[name], text)

    def mask_payload(self, payload: str | None) -> tuple[str, str | None]:
        """(payload with PII hidden, a note on what could not be checked or None)."""
        if payload is None:
            return "", None
        try:
            return json.dumps(self._walk(json.loads(payload)), ensure_ascii=False, separators=(",", ":")), None
        except ValueError:
            return self._mask_text(payload, "not JSON")
        except RecursionError:
            # Python's JSON reader and writer recurse once per level; the stream quarantines
            # records nested deeper than that as invalid_json, so `show` meets them.
            return self._mask_text(payload, "nested too deep for Python's JSON reader, searched as text")

    def _walk(self, node: Any) -> Any:
        if isinstance(node, dict):
            return {name: self.mask_value(name, value) if name in self.pii_labels else self._walk(value)
                    for name, value in node.items()}
        if isinstance(node, list):
            return [self._walk(item) for item in node]
        return node

    def _mask_text(self, payload: str, why: str) -> tuple[str, str]:
        """A payload that cannot be read as JSON (`why`, the note's opening): hide each PII
        attribute's value found by its name.

        A value that cannot be delimited (e.g. an M or L value of a PII attribute) hides
        the rest of the text, since its end cannot be told from here.
        """
        if self._pattern is None:
            return payload, f"{why}: shown as stored (no contract flags an attribute as PII)"
        out, position, hidden = [], 0, 0
        for match in self._pattern.finditer(payload):
            if match.start() < position:
                continue
            out.append(payload[position:match.end()])
            value = _SCALAR_VALUE.match(payload, match.end())
            if value is None:
                out.append(f"{MASK} [rest hidden: a value of PII attribute {match.group(1)!r} could not be delimited]")
                return "".join(out), (f"{why}: {hidden + 1} PII value(s) found by attribute name hidden; "
                                      "text before them is shown as stored")
            descriptor, text = value.group("descriptor"), value.group("text")
            if descriptor:
                out.append(f'{{"{descriptor}":"{self._hidden(match.group(1), text) if text is not None else MASK}"}}')
            else:
                out.append(f'"{MASK}"')
            hidden += 1
            position = value.end()
        out.append(payload[position:])
        return "".join(out), (f"{why}: {hidden} PII value(s) found by attribute name hidden; "
                              "the rest is shown as stored and may hold PII the masker cannot recognise")


# A PII attribute's value in text that did not parse: a scalar descriptor (closed or
# cut off by truncation) or a bare JSON string. `text` is only set for a complete,
# unescaped S/N text, the only kind that gets a pseudonym.
_SCALAR_VALUE = re.compile(
    r'\{\s*"(?P<descriptor>[SN])"\s*:\s*(?:"(?P<text>[^"\\]*)"\s*\}|"(?:[^"\\]|\\.)*(?:"\s*\}?|$))'
    r'|"(?:[^"\\]|\\.)*(?:"|$)'
)


def pii_labels(contracts: Mapping[str, TableContract]) -> dict[str, str]:
    """DynamoDB attribute name -> column name of every attribute flagged PII (any depth, any contract)."""
    labels: dict[str, str] = {}

    def visit(spec: AttributeSpec) -> None:
        if spec.pii:
            labels.setdefault(spec.name, spec.column)
        for child in ([spec.items] if spec.items is not None else []) + list(spec.fields):
            visit(child)

    for contract in contracts.values():
        for spec in contract.attributes:
            visit(spec)
    return labels


def show_lines(records: Sequence[QuarantinedRecord], masker: PiiMasker) -> list[str]:
    how = ("pseudonyms pii:<HMAC-SHA-256 under the PII key>" if masker.key is not None
           else f"{MASK} (no PII key found, so no pseudonyms)")
    names = ", ".join(sorted(masker.pii_labels)) or "none"
    lines = [f"PII attributes ({names}) are shown as {how}"]
    for row in records:
        payload, note = masker.mask_payload(row.payload)
        ingested = row.ingested_at.isoformat() if row.ingested_at else "-"
        lines += [
            f"--- record {row.record_id[:16]}  batch={row.batch_id}  ingested={ingested}",
            f"    table={row.table or '-'}  reason={row.reason}  source={row.source_ref or '-'}",
            f"    {payload}",
        ]
        if note:
            lines.append(f"    note: {note}")
    return lines


# --------------------------------------------------------------------------- replay


def landed_record_ids(data_root: Path) -> set[str]:
    return {record for run in QUARANTINE_REPLAYS.succeeded(data_root) for record in run["landed"]}


@dataclass(frozen=True)
class ReplayPlan:
    data_root: Path
    replay_id: str
    batch_id: int
    records: tuple[QuarantinedRecord, ...]
    selection: Mapping[str, Any]
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
        return ReplayPlan(data_root, run["replay_id"], run["batch_id"], tuple(by_id.values()), run["selection"],
                          resumed=True)
    selected = select_records(rows, reason=reason, table=table, batches=batches)
    # One record quarantined by several batches (a redelivered file) is replayed once.
    unique = list({row.record_id: row for row in selected}.values())
    replayable = tuple(row for row in unique if row.reason not in NOT_REPLAYABLE_REASONS)
    left_out = tuple(row for row in unique if row.reason in NOT_REPLAYABLE_REASONS)
    replay_id = QUARANTINE_REPLAYS.next_run_id(data_root, sorted(row.record_id for row in replayable))
    selection = {"reason": reason, "table": table, "batches": list(batches)}
    return ReplayPlan(data_root, replay_id, QUARANTINE_REPLAYS.batch_id(replay_id), replayable, selection,
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
    *,
    out: Printer = print,
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
    result = ReplayResult(plan.replay_id, plan.batch_id, len(plan.records), len(landed),
                          dict(Counter(failing.values())))
    out(result.summary())
    return result


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
        plan = ReplayPlan(target_root, run["replay_id"], run["batch_id"], tuple(rows), run["selection"])
        out(f"[replay {run['replay_id']}] {len(rows)} of its {len(stored)} records did not land here from their "
            "source; replaying them")
        results.append(run_replay(spark, plan, contracts, sink, out=out))
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


# --------------------------------------------------------------------------- `lakehouse quarantine`


def quarantine_summary(layout: DataLayout, *, out: Printer = print) -> QuarantineSummary:
    """`lakehouse quarantine summary`: open rows of the active data root by table, reason and day."""
    require_data_dir(layout.root)
    summary = summarize(layout.active().root)
    for line in summary.lines():
        out(line)
    return summary


def quarantine_show(
    layout: DataLayout,
    *,
    reason: str | None,
    table: str | None = None,
    batches: Sequence[int] = (),
    limit: int = 5,
    contracts_dir: str | None = None,
    out: Printer = print,
) -> list[QuarantinedRecord]:
    """`lakehouse quarantine show`: a few open payloads of one reason, PII hidden (as the
    marts' pseudonyms under the data directory's PII key, or masked without one)."""
    if reason is None:
        raise QuarantineError("show needs --reason (see `lakehouse quarantine summary`)")
    require_data_dir(layout.root)
    contracts = load_checked_contracts(contracts_dir)
    key = key_of_data_dir(layout.root)
    rows = select_records(open_records(layout.active().root), reason=reason, table=table, batches=batches)
    for line in show_lines(rows[:limit], PiiMasker(pii_labels(contracts), key)):
        out(line)
    out(f"shown {min(limit, len(rows))} of {len(rows)} open records with reason {reason}")
    for line in what_to_do(row.reason for row in rows):
        out(line)
    return rows[:limit]


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
    require_data_dir(layout.root)
    contracts = load_checked_contracts(contracts_dir)
    target = layout.active()
    # Planned under the lock too: a replay running elsewhere could change what is open.
    with hold_data_dir(layout.root, "quarantine replay", report=out):
        plan = plan_replay(target.root, reason=reason, table=table, batches=batches)
        if not plan.records:
            for line in plan.left_out():
                out(line)
            out("nothing to replay")
            return None
        for line in plan.describe():
            out(line)
        check_contract_changes(target.raw, contracts, out)
        with session_for(spark, out) as session:
            # Its batch id is its own (recorded_batch.operation_batch_id): with it, the Hudi sink's
            # commit marker "quarantine-replay:<batch id>" lets a retry skip the tables already committed.
            pipeline = local_pipeline(session, target, contracts, sink, stream_id="quarantine-replay")
            with explaining_retry(QuarantineError,
                                  f"replay failed (run replay again: it resumes batch {plan.batch_id})"):
                result = run_replay(session, plan, pipeline.contracts, pipeline.sink, out=out)
    return result
