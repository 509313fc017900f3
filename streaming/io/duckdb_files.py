"""Local paths in DuckDB SQL, taken literally.

DuckDB's file readers (read_parquet, read_json, read_blob, parquet_metadata, glob) expand
`*`, `?` and `[...]` in every path they are given, a list of exact file names included:
a data directory named `run[2]` would read the files of `run2`, and one named `a*` those
of every sibling starting with `a`. Braces are not special to DuckDB. A character class
of one character matches that character alone, so each special character is put in one.
"""
from __future__ import annotations

import re
from pathlib import Path

from streaming.io.layout import CHANGE_LOG_FILE_GLOB, HUDI_TIMELINE_FOLDER

_GLOB_SPECIAL = re.compile(r"([\[*?])")


def duckdb_glob_literal(path: Path | str) -> str:
    """`path` as a DuckDB glob that matches exactly that path."""
    return _GLOB_SPECIAL.sub(r"[\1]", str(path))


def sql_string(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def register_change_log(connection: object, name: str, table_dir: Path) -> bool:
    """Make `name` a relation over a local change log, in whichever format it was written:
    the Hudi table's snapshot (read with hudi-rs, as dbt reads it) or the Parquet sink's
    batch files. False, registering nothing, while the change log has no rows yet (no
    files, or no completed Hudi commit)."""
    if (table_dir / HUDI_TIMELINE_FOLDER).is_dir():
        from lakehouse_dbt.hudi_raw import read_hudi_snapshot

        snapshot = read_hudi_snapshot(str(table_dir))
        if snapshot is None:
            return False
        connection.register(name, snapshot)  # type: ignore[attr-defined]
        return True
    files = sorted(table_dir.glob(CHANGE_LOG_FILE_GLOB))
    if not files:
        return False
    listed = ", ".join(sql_string(duckdb_glob_literal(path)) for path in files)
    connection.execute(  # type: ignore[attr-defined]
        f'create or replace temporary view "{name}" as select * from read_parquet([{listed}], hive_partitioning = false)'
    )
    return True
