"""Which landing files each micro-batch read, with their size and modification time.

Landing files are immutable once landed: the stream reads a file once (its checkpoint
remembers the path) and never again, so bytes appended later are never read. The
ledger keeps (path, length, modification time) per batch, one JSON file per batch id
(a replayed batch rewrites its own entry), so `changed_files` can name every file that
was modified after it was processed.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streaming.atomic_files import write_json_atomically


@dataclass(frozen=True)
class LandedFile:
    path: str  # as Spark lists it: `file:/...`, `s3://bucket/key`
    length: int
    modified_ms: int  # modification time, epoch milliseconds


@dataclass(frozen=True)
class ChangedFile:
    path: str
    batch_id: int
    processed_length: int
    processed_modified_ms: int
    length: int
    modified_ms: int

    def warning(self) -> str:
        return (
            f"landing file changed after batch {self.batch_id} read it: {self.path} "
            f"(then {self.processed_length} bytes, modified {self.processed_modified_ms} ms; "
            f"now {self.length} bytes, modified {self.modified_ms} ms); what changed was not read. "
            "Landing files must never be appended to or rewritten: land new data as new files."
        )


def _entry_path(ledger_dir: Path, batch_id: int) -> Path:
    return ledger_dir / f"batch-{batch_id:012d}.json"


def record_batch(ledger_dir: str | Path, batch_id: int, files: Sequence[LandedFile]) -> None:
    """Write the entry of one batch (atomically: a crash leaves the old entry or the new)."""
    entry = {
        "batch_id": batch_id,
        "files": [{"path": f.path, "length": f.length, "modified_ms": f.modified_ms} for f in files],
    }
    write_json_atomically(_entry_path(Path(ledger_dir), batch_id), entry, indent=1)


def _local_path(path: str) -> Path | None:
    """The local file a listed path names, or None for a remote one (s3://)."""
    scheme, colon, rest = path.partition(":")
    if not colon or len(scheme) == 1:
        return Path(path)
    if scheme == "file":
        return Path("/" + rest.lstrip("/"))
    return None


def changed_files(ledger_dir: str | Path) -> list[ChangedFile]:
    """Local files whose size or modification time differs from when their batch read
    them. Files since deleted are not reported (a lifecycle rule may expire them); remote
    paths are not checked here."""
    folder = Path(ledger_dir)
    if not folder.is_dir():
        return []
    changed = []
    for entry_file in sorted(folder.glob("batch-*.json")):
        entry = json.loads(entry_file.read_text(encoding="utf-8"))
        for file in entry["files"]:
            local = _local_path(file["path"])
            if local is None:
                continue
            try:
                stat = local.stat()
            except FileNotFoundError:
                continue
            # Hadoop's local file system reports whole milliseconds, truncated.
            length, modified_ms = stat.st_size, stat.st_mtime_ns // 1_000_000
            if (length, modified_ms) != (file["length"], file["modified_ms"]):
                changed.append(ChangedFile(file["path"], entry["batch_id"], file["length"], file["modified_ms"],
                                           length, modified_ms))
    return changed
