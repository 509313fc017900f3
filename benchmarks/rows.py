"""Row multisets of the local raw tables, and their comparison (exactly-once checks)."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

BATCH_FOLDER = re.compile(r"^_batch_id=(\d+)$")
# Differs between two runs over the same input by design: the processing time.
RUN_DEPENDENT_COLUMNS = frozenset({"_ingested_at"})

Row = tuple[Any, ...]


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    return value


def batch_files(table_dir: Path) -> list[tuple[int, Path]]:
    """(batch id, file) for every committed Parquet file of a batch-folder table."""
    found = []
    for folder in sorted(table_dir.glob("_batch_id=*")):
        match = BATCH_FOLDER.match(folder.name)
        if match:
            found += [(int(match.group(1)), path) for path in sorted(folder.glob("*.parquet"))]
    return found


def table_rows(table_dir: Path, exclude: Iterable[str] = RUN_DEPENDENT_COLUMNS) -> Counter[Row]:
    """Multiset of a table's rows (with `_batch_id`), `exclude`d columns left out."""
    excluded = set(exclude)
    rows: Counter[Row] = Counter()
    for batch_id, path in batch_files(table_dir):
        table = pq.read_table(path)
        names = [name for name in table.column_names if name not in excluded]
        for record in table.select(names).to_pylist():
            rows[(batch_id, *(_hashable(record[name]) for name in names))] += 1
    return rows


def data_dir_rows(data_dir: Path) -> dict[str, Counter[Row]]:
    """Rows of every raw table and of the quarantine under a local data directory."""
    tables = {f"raw/{path.name}": table_rows(path) for path in sorted((data_dir / "raw").glob("*")) if path.is_dir()}
    tables["quarantine"] = table_rows(data_dir / "quarantine")
    return tables


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
