"""The raw formats by name, and which one a local raw folder holds. A new format is one
folder beside hudi/ and parquet/ and one entry of FORMATS."""
from __future__ import annotations

from pathlib import Path

from streaming.errors import OperatorError
from streaming.io.formats.hudi.format import HUDI
from streaming.io.formats.parquet.format import PARQUET
from streaming.io.formats.raw_format import RawFormat

FORMATS: dict[str, RawFormat] = {raw.name: raw for raw in (HUDI, PARQUET)}
FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)
# The production format is the local default too (DESIGN.md); the others are named explicitly.
DEFAULT_FORMAT: RawFormat = HUDI
# An empty raw folder is read as a change log without files: nothing to load, no commits.
EMPTY_RAW_READ_AS: RawFormat = PARQUET


def raw_format(name: str) -> RawFormat:
    """The format named `name`; ValueError naming the choices for any other."""
    if name not in FORMATS:
        raise ValueError(f"sink must be one of {', '.join(FORMAT_NAMES)}, not {name!r}")
    return FORMATS[name]


def format_of_table(folder: Path) -> RawFormat | None:
    """The format whose raw table the local `folder` is, None when it is none (yet)."""
    return next((raw for raw in FORMATS.values() if raw.is_table(folder)), None)


def format_on_disk(raw_dir: Path) -> RawFormat | None:
    """What a local raw folder holds, None while empty. Two formats at once are refused:
    one data directory is written by one sink. The ledger, staging and contract folders
    (`_...`) are no tables."""
    folders = [folder for folder in (sorted(raw_dir.iterdir()) if raw_dir.is_dir() else [])
               if not folder.name.startswith("_")]
    found = {raw.name: [folder.name for folder in folders if raw.is_table(folder)] for raw in FORMATS.values()}
    held = [name for name, tables in found.items() if tables]
    if len(held) > 1:
        first, second = held[:2]
        raise OperatorError(
            f"{raw_dir} holds {FORMATS[first].title} raw tables ({found[first][0]}) and {FORMATS[second].title} ones "
            f"({found[second][0]}); one data directory is written by one sink: rebuild one of them with "
            "`lakehouse reprocess`"
        )
    return FORMATS[held[0]] if held else None


def format_to_read(raw_dir: Path) -> RawFormat:
    """The format a local raw folder's tables are read as: the one it holds, or, while it
    holds none, EMPTY_RAW_READ_AS."""
    return format_on_disk(raw_dir) or EMPTY_RAW_READ_AS


def register_change_log(connection: object, name: str, table_dir: Path) -> bool:
    """Make `name` a DuckDB relation over a local change log, in whichever format it was
    written; False, registering nothing, while it has no rows yet."""
    raw = format_of_table(table_dir)
    return raw is not None and raw.register(connection, name, table_dir)
