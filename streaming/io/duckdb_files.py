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

_GLOB_SPECIAL = re.compile(r"([\[*?])")


def duckdb_glob_literal(path: Path | str) -> str:
    """`path` as a DuckDB glob that matches exactly that path."""
    return _GLOB_SPECIAL.sub(r"[\1]", str(path))


def sql_string(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"

