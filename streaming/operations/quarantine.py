"""`lakehouse quarantine summary` and `show`: what the quarantine holds, and a PII-aware look at it.

The quarantine (`<data root>/quarantine/_batch_id=<n>/*.parquet`, written by
`streaming.io.quarantine_writer.QuarantineWriter`) is never edited: it stays the record of what
arrived and why it was refused. Its replay, `lakehouse quarantine replay`, is a one-off
batch (streaming/operations/batches/quarantine_replay.py) and records its runs beside it.

A quarantined record is identified by `record_id`, the SHA-256 of its `source_ref` and
its payload text: the same bytes from the same source are the same record, whichever
stream batch (or Spark retry of it) quarantined them. A record is open while no
succeeded replay landed it; `summary`, `show` and `replay` only consider open records.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakehouse_dbt.pii_key import key_of_data_dir, pseudonym
from streaming.contracts.model import AttributeSpec, TableContract
from streaming.contracts.types import DYNAMODB_TYPES
from streaming.errors import OperatorError
from streaming.io.layout import DataLayout, require_data_dir
from streaming.io.quarantine_rows import QuarantinedRecord, read_quarantine_folder
from streaming.operations.batches.recorded_batch import QUARANTINE_REPLAYS
from streaming.pipeline import reasons
from streaming.runtime.startup import load_checked_contracts

Printer = Callable[[str], None]


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



def landed_record_ids(data_root: Path) -> set[str]:
    return {record for run in QUARANTINE_REPLAYS.succeeded(data_root) for record in run["landed"]}


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
    record's table may be unknown or wrong. With `key`, an S or N value (the text raw
    keeps exactly: `is_exact_text` in contracts/types.py) becomes
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
            if descriptor in DYNAMODB_TYPES and DYNAMODB_TYPES[descriptor].is_exact_text and isinstance(inner, str):
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
