"""Reading the quarantine back: the rows `streaming.io.quarantine_writer.QuarantineWriter` wrote under
`<root>/_batch_id=<n>/*.parquet`, each with the identity of the record it refused.

`lakehouse quarantine` reads them to summarise, show and select for a replay; a one-off
batch (streaming/operations/batches/recorded_batch.py) reads the rows of its own batch to check
that every record it took either landed or was quarantined.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from streaming.io.layout import QUARANTINE_FILE_GLOB


@dataclass(frozen=True)
class QuarantinedRecord:
    record_id: str
    table: str | None
    reason: str
    payload: str | None
    source_ref: str | None
    ingested_at: datetime | None
    batch_id: int

    @property
    def day(self) -> date | None:
        return None if self.ingested_at is None else self.ingested_at.astimezone(timezone.utc).date()


def record_id(source_ref: str | None, payload: str | None) -> str:
    """The identity of a quarantined record: its source and its exact text."""
    text = f"{source_ref or ''}\x00{payload or ''}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_quarantine_folder(folder: Path) -> list[QuarantinedRecord]:
    """Every row under `<folder>/_batch_id=<n>/*.parquet`, oldest batch folder first."""
    import pyarrow.parquet as pq

    rows: list[QuarantinedRecord] = []
    for path in sorted(folder.glob(QUARANTINE_FILE_GLOB)):
        table = pq.read_table(path, columns=["_source_table", "reason", "payload", "source_ref", "_ingested_at"])
        batch_id = int(path.parent.name.split("=", 1)[1])
        for row in table.to_pylist():
            ingested_at = row["_ingested_at"]
            if ingested_at is not None and ingested_at.tzinfo is None:
                ingested_at = ingested_at.replace(tzinfo=timezone.utc)
            rows.append(QuarantinedRecord(
                record_id(row["source_ref"], row["payload"]), row["_source_table"], row["reason"],
                row["payload"], row["source_ref"], ingested_at, batch_id,
            ))
    return rows
