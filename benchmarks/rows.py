"""Row multisets of a local data directory's raw change logs and quarantine, and their
comparison (the kill drill's exactly-once check).

Files are found as every reader finds them (`streaming.io.layout`): change logs at
`raw/<raw_table>_changes/_ingest_hour=<h>/_batch_id=<n>/*.parquet`, the quarantine at
`quarantine/_batch_id=<n>/*.parquet`. Scratch folders (`_tmp`) hold batches not yet
renamed into place and are not part of any table.

A raw folder holding `.hoodie` is a Hudi table (the Hudi sink's change log `<t>_changes`
or current state `<t>`): its rows are its snapshot as hudi-rs reads it (what dbt reads),
each led by its `_batch_id` column, without the columns a write stamps (`_hoodie_*`,
`_ingested_at`, `_ingest_hour`). A current-state table compared as a row multiset is
compared per key: each key's one row.
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
# A Hudi table's columns that differ between runs too: Hudi's meta columns (commit time,
# sequence number, file name) and the ingest hour, stored as a column there.
HUDI_META_PREFIX = "_hoodie_"
HUDI_RUN_DEPENDENT_COLUMNS = RUN_DEPENDENT_COLUMNS | {raw_layout.INGEST_HOUR_COLUMN}

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


def hudi_table_rows(table_dir: Path, exclude: Iterable[str] = HUDI_RUN_DEPENDENT_COLUMNS) -> Counter[Row]:
    """Multiset of a Hudi table's snapshot rows, each led by its `_batch_id`, `exclude`d
    and `_hoodie_*` columns left out."""
    from lakehouse_dbt.hudi_raw import read_hudi_snapshot

    excluded = set(exclude)
    table = read_hudi_snapshot(str(table_dir))
    if table is None:
        return Counter()  # no commit of it has completed yet
    names = [name for name in table.column_names
             if name not in excluded and not name.startswith(HUDI_META_PREFIX) and name != raw_layout.BATCH_COLUMN]
    batch_ids = (table.column(raw_layout.BATCH_COLUMN).to_pylist() if raw_layout.BATCH_COLUMN in table.column_names
                 else [None] * table.num_rows)
    rows: Counter[Row] = Counter()
    for batch_id, record in zip(batch_ids, table.select(names).to_pylist(), strict=True):
        rows[(batch_id, *(_hashable(record[name]) for name in names))] += 1
    return rows


def is_hudi_table(table_dir: Path) -> bool:
    return (table_dir / raw_layout.HUDI_TIMELINE_FOLDER).is_dir()


def change_log_dirs(data_dir: Path) -> list[Path]:
    """Every change-log folder under `<data_dir>/raw`; `_`-prefixed ones (scratch, the
    contract registry) are bookkeeping, not tables."""
    raw = DataLayout(data_dir).raw
    return [path for path in sorted(raw.glob("*")) if path.is_dir() and not path.name.startswith("_")]


def data_dir_rows(data_dir: Path) -> dict[str, Counter[Row]]:
    """Rows of every raw table (change logs, and the Hudi sink's current state) and of the
    quarantine under a local data directory."""
    tables = {f"raw/{path.name}": hudi_table_rows(path) if is_hudi_table(path) else table_rows(path)
              for path in change_log_dirs(data_dir)}
    tables["quarantine"] = table_rows(DataLayout(data_dir).quarantine, QUARANTINE_FILE_GLOB)
    return tables


def pending_hudi_instants(data_dir: Path) -> list[Path]:
    """Requested or in-flight instants of the raw Hudi tables that never completed (a
    commit a crash interrupted and no later write rolled back)."""
    pending = []
    for table in change_log_dirs(data_dir):
        timeline = table / raw_layout.HUDI_TIMELINE_FOLDER
        if not timeline.is_dir():
            continue
        names = {path.name for path in timeline.iterdir() if path.is_file()}
        # `<instant>.<action>` once completed (commit, rollback, clean, ...); a rollback
        # deletes the requested and in-flight files of the instant it rolled back.
        # (A commit's in-flight file is `<instant>.inflight`: one dot, not completed.)
        completed = {name.split(".", 1)[0] for name in names if name.count(".") == 1 and name[0].isdigit()
                     and name.split(".", 1)[1] not in ("inflight", "requested")}
        pending += [timeline / name for name in sorted(names)
                    if (name.endswith(".inflight") or name.endswith(".requested"))
                    and name.split(".", 1)[0] not in completed]
    return pending


def staged_leftovers(data_dir: Path) -> list[Path]:
    """Files still in a scratch folder: after a finished run every batch was renamed into
    place; and a Hudi table's instants that never completed."""
    scratch = [path for path in data_dir.glob(f"**/{raw_layout.TEMPORARY_FOLDER}/**/*") if path.is_file()]
    return sorted([*scratch, *pending_hudi_instants(data_dir)])


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
