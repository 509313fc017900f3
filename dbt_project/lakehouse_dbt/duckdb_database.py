"""dbt-duckdb plugin (profiles.yml, target `local`): attaches the data directory's
database file, `$LAKEHOUSE_DATA_DIR/lakehouse.duckdb`, as catalog `lakehouse` and makes
it the default catalog of every dbt cursor.

Why the profile does not name the file as its `path`: dbt hashes the profile's
connection settings into the state a saved parse is checked against
(dbt/parser/manifest.py, build_manifest_state_check), so a path naming the data
directory made each data directory a different profile, and every dbt command on a
new one a full parse (6 s on an idle machine). The profile's connection settings are
constant (an in-memory DuckDB, this plugin); the data directory is read here, from the
environment, when dbt opens its connection.
"""

from __future__ import annotations

import os
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from lakehouse_dbt.env import DATA_DIR_ENV

# The catalog name dbt writes into every relation (profiles.yml `database`): the one
# DuckDB gives the file when it opens it directly, so other readers see the same names.
DATABASE = "lakehouse"
DATABASE_FILE = "lakehouse.duckdb"
# profiles.yml's default when the variable is unset, relative to the working directory.
DEFAULT_DATA_DIR = "data"


def data_dir_from_environment() -> str:
    return os.environ.get(DATA_DIR_ENV, DEFAULT_DATA_DIR)


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self._data_dir = data_dir_from_environment()

    def configure_connection(self, conn: Any) -> None:
        # A parameter, not SQL text: the path is a literal whatever its characters.
        # dbt-duckdb runs the profile's `attach` entries after this, where the one naming
        # `lakehouse` finds it attached and does nothing (ATTACH IF NOT EXISTS).
        conn.execute(f"attach ? as {DATABASE}", [os.path.join(self._data_dir, DATABASE_FILE)])

    def configure_cursor(self, cursor: Any) -> None:
        # dbt-duckdb keeps its DuckDB instance for the process and reuses it for the next
        # command whose profile is equal, and the profile no longer names the data
        # directory: refuse a cursor for another data directory rather than write into
        # this one (streaming.runtime.dbt_runner closes the instance after each command).
        if data_dir_from_environment() != self._data_dir:
            raise RuntimeError(
                f"dbt's open DuckDB has {os.path.join(self._data_dir, DATABASE_FILE)} attached, but "
                f"{DATA_DIR_ENV} is now {data_dir_from_environment()}: close the DuckDB environment "
                "between commands on different data directories"
            )
        # Each cursor starts in DuckDB's default catalog (the in-memory one); the project's
        # unqualified names (schema raw, raw_hudi) mean the data directory's database.
        cursor.execute(f"use {DATABASE}")
