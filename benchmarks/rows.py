"""Row multisets of a local data directory's raw change logs and quarantine, and their
comparison (the kill drill's exactly-once check).

Files are found as every reader finds them (`streaming.io.layout`): change logs at
`raw/<raw_table>_changes/_ingest_hour=<h>/_batch_id=<n>/*.parquet`, the quarantine at
`quarantine/_batch_id=<n>/*.parquet`. Scratch folders (`_tmp`) hold batches not yet
renamed into place and are not part of any table.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from streaming.io import layout as raw_layout
from streaming.io.layout import DataLayout

BATCH_FOLDER = re.compile(rf"^{raw_layout.BATCH_COLUMN}=(-?\d+)$")
QUARANTINE_FILE_GLOB = f"{raw_layout.BATCH_COLUMN}=*/*.parquet"
# Differ between two runs over the same input by design: the processing time (the
# ingest-hour folder is derived from it and is not a column of the files).
RUN_DEPENDENT_COLUMNS = frozenset({"_ingested_at"})

Row = tuple[Any, ...]


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    return value


def batch_files(table_dir: Path, pattern: str = raw_layout.CHANGE_LOG_FILE_GLOB) -> list[tuple[int, Path]]:
    """(batch id of the folder, file) for every Parquet file `pattern` finds under `table_dir`."""
    found = []
    for path in sorted(table_dir.glob(pattern)):
        match = BATCH_FOLDER.match(path.parent.name)
        if match:
            found.append((int(match.group(1)), path))
    return found


def table_rows(table_dir: Path, pattern: str = raw_layout.CHANGE_LOG_FILE_GLOB,
               exclude: Iterable[str] = RUN_DEPENDENT_COLUMNS) -> Counter[Row]:
    """Multiset of a table's rows, each led by its folder's batch id, `exclude`d columns left out."""
    excluded = set(exclude)
    rows: Counter[Row] = Counter()
    for batch_id, path in batch_files(table_dir, pattern):
        table = pq.read_table(path)
        names = [name for name in table.column_names if name not in excluded]
        for record in table.select(names).to_pylist():
            rows[(batch_id, *(_hashable(record[name]) for name in names))] += 1
    return rows


def change_log_dirs(data_dir: Path) -> list[Path]:
    """Every change-log folder under `<data_dir>/raw`; `_`-prefixed ones (scratch, the
    contract registry) are bookkeeping, not tables."""
    raw = DataLayout(data_dir).raw
    return [path for path in sorted(raw.glob("*")) if path.is_dir() and not path.name.startswith("_")]


def data_dir_rows(data_dir: Path) -> dict[str, Counter[Row]]:
    """Rows of every raw change log and of the quarantine under a local data directory."""
    tables = {f"raw/{path.name}": table_rows(path) for path in change_log_dirs(data_dir)}
    tables["quarantine"] = table_rows(DataLayout(data_dir).quarantine, QUARANTINE_FILE_GLOB)
    return tables


def staged_leftovers(data_dir: Path) -> list[Path]:
    """Files still in a scratch folder: after a finished run every batch was renamed into place."""
    return sorted(path for path in data_dir.glob(f"**/{raw_layout.TEMPORARY_FOLDER}/**/*") if path.is_file())


@dataclass(frozen=True)
class RowDiff:
    lost: int  # rows of the reference missing from the candidate (counted with multiplicity)
    duplicated: int  # rows of the reference present more often in the candidate
    unexpected: int  # rows the reference does not have at all

    @property
    def equal(self) -> bool:
        return self.lost == self.duplicated == self.unexpected == 0


def compare_rows(reference: Counter[Row], candidate: Counter[Row]) -> RowDiff:
    lost = sum((reference - candidate).values())
    surplus = candidate - reference
    duplicated = sum(count for row, count in surplus.items() if row in reference)
    unexpected = sum(count for row, count in surplus.items() if row not in reference)
    return RowDiff(lost, duplicated, unexpected)


def compare_data_dirs(reference: dict[str, Counter[Row]], candidate: dict[str, Counter[Row]]) -> dict[str, RowDiff]:
    return {name: compare_rows(reference.get(name, Counter()), candidate.get(name, Counter()))
            for name in sorted(set(reference) | set(candidate))}
