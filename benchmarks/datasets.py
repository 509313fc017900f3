"""Landing data sets for the benchmarks, generated once and shared between cases.

The sample generator keeps a whole run in memory, so large sets are generated in
chunks of at most `CHUNK_RECORDS` records, each chunk later in time than the previous
one. Smaller sizes are prefixes of a larger set (hard links, no copies): a prefix of
the landing files is what a stream delivered up to some moment.

A set holds the three packaged tables: customers and orders, and the single-table
design `app` with one tenant per ten customers (about a quarter of the records, a
quarter of them items of undeclared kinds, for `app_unrouted`). `app_only` sets hold
the app table alone, for the routing-cost comparison.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streaming.samples.generator import write_landing_files

# Measured with the generator's defaults: about 14.5 records per customer (customers and
# orders), 19.2 with one app tenant per ten customers, 46.5 per tenant.
CUSTOMERS_PER_TENANT = 10
RECORDS_PER_CUSTOMER = 19.2
RECORDS_PER_TENANT = 46.5
CHUNK_RECORDS = 250_000
_FIRST_START = datetime(2026, 11, 1, tzinfo=timezone.utc)
_CHUNK_SPACING = timedelta(days=60)
# Where a landing record names its DynamoDB table: a Kinesis-format record in `tableName`,
# a DynamoDB Streams-format record in its stream's ARN, `...:table/<name>/stream/<label>`.
_TABLE_NAME_PLACES = (re.compile(rb'("tableName"\s*:\s*")([^"]*)(")'), re.compile(rb'(:table/)([^/"]*)(/stream/)'))
# Spark's file source takes files oldest first; distinct modification times make the
# files of each micro-batch the same in every run.
_MTIME_BASE = 1_700_000_000


@dataclass(frozen=True)
class LandingFile:
    path: Path
    records: int


@dataclass(frozen=True)
class LandingSet:
    root: Path
    files: tuple[LandingFile, ...]

    @property
    def records(self) -> int:
        return sum(file.records for file in self.files)


def customers_for(records: int) -> int:
    return max(1, round(records / RECORDS_PER_CUSTOMER))


def generate_landing(root: Path, records: int, *, records_per_file: int = 500, seed: int = 7,
                     app_only: bool = False) -> LandingSet:
    """At least about `records` landing records under `root`, in files of `records_per_file`;
    `app_only`: the app table's records alone."""
    root.mkdir(parents=True, exist_ok=True)
    files: list[LandingFile] = []
    produced = 0
    chunk = 0
    while produced < records * 0.98:
        wanted = min(CHUNK_RECORDS, records - produced)
        customers = 0 if app_only else customers_for(wanted)
        tenants = (max(1, round(wanted / RECORDS_PER_TENANT)) if app_only
                   else max(1, customers // CUSTOMERS_PER_TENANT))
        summary = write_landing_files(
            root,
            records_per_file=records_per_file,
            seed=seed + chunk,
            customers=customers,
            tenants=tenants,
            start=_FIRST_START + chunk * _CHUNK_SPACING,
        )
        remaining = summary.records
        for path in summary.files:
            lines = min(records_per_file, remaining)
            remaining -= lines
            files.append(LandingFile(path, lines))
        produced += summary.records
        chunk += 1
    for index, file in enumerate(files):
        os.utime(file.path, (_MTIME_BASE + index, _MTIME_BASE + index))
    return LandingSet(root, tuple(files))


def link_files(files: tuple[LandingFile, ...] | list[LandingFile], source_root: Path, target_root: Path,
               prefix: str = "") -> list[LandingFile]:
    """Hard-link `files` below `target_root`, keeping their relative folders."""
    linked = []
    for file in files:
        relative = file.path.relative_to(source_root)
        target = target_root / prefix / relative if prefix else target_root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(file.path, target)
        except OSError:
            shutil.copy2(file.path, target)
        linked.append(LandingFile(target, file.records))
    return linked


def prefix_set(source: LandingSet, records: int, target_root: Path) -> LandingSet:
    """The first files of `source` holding about `records` records, linked under `target_root`."""
    chosen: list[LandingFile] = []
    total = 0
    for file in source.files:
        if total >= records:
            break
        chosen.append(file)
        total += file.records
    if total < records * 0.98:
        raise ValueError(f"the source set holds {source.records} records, fewer than {records}")
    shutil.rmtree(target_root, ignore_errors=True)
    return LandingSet(target_root, tuple(link_files(chosen, source.root, target_root)))


def replicated_set(source: LandingSet, copies: int, target_root: Path) -> LandingSet:
    """`copies` copies of `source` (hard links), in folders copy-<n>: the same records re-delivered."""
    shutil.rmtree(target_root, ignore_errors=True)
    files: list[LandingFile] = []
    for copy in range(copies):
        files += link_files(source.files, source.root, target_root, prefix=f"copy-{copy:03d}")
    return LandingSet(target_root, tuple(files))


def renamed_record(line: bytes, renames: Mapping[str, str]) -> bytes:
    """The landing record `line` with its DynamoDB table renamed as `renames` says (a table
    it does not name keeps its name; a line naming no table is returned as it is)."""
    def rename(match: re.Match[bytes]) -> bytes:
        name = match.group(2).decode("utf-8", "replace")
        return match.group(1) + renames.get(name, name).encode("utf-8") + match.group(3)

    for place in _TABLE_NAME_PLACES:
        line = place.sub(rename, line, count=1)
    return line


def renamed_copy_set(source: LandingSet, renames: Mapping[str, str], target_root: Path) -> LandingSet:
    """`source` with each record followed by a copy of it whose table is renamed: twice the
    records, in the same files and folders, every file holding originals and copies alike
    (so any prefix of the records, such as a priming batch, reaches both kinds of table)."""
    shutil.rmtree(target_root, ignore_errors=True)
    files: list[LandingFile] = []
    for file in source.files:
        target = target_root / file.path.relative_to(source.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = file.path.read_bytes().removesuffix(b"\n").split(b"\n")
        target.write_bytes(b"".join(line + b"\n" + renamed_record(line, renames) + b"\n" for line in lines))
        files.append(LandingFile(target, 2 * file.records))
    return LandingSet(target_root, tuple(files))
