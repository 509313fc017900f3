"""dbt-duckdb plugin (profiles.yml, target `local`): opens the data directory's database
file, `$LAKEHOUSE_DATA_DIR/lakehouse.duckdb`, where the profile names an in-memory one.

Why the profile does not name the file as its `path`: dbt hashes the profile's
connection settings into the state a saved parse is checked against
(dbt/parser/manifest.py, build_manifest_state_check), so a path naming the data
directory made each data directory a different profile, and every dbt command on a
new one a full parse (6 s on an idle machine). The profile's connection settings are
constant; the data directory is read here, from the environment, when dbt opens its
connection, after dbt has parsed.
"""

from __future__ import annotations

import os
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from lakehouse_dbt.data_dir import DATABASE_FILE
from lakehouse_dbt.env import DATA_DIR_ENV

# profiles.yml's default when the variable is unset, relative to the working directory.
DEFAULT_DATA_DIR = "data"


class Plugin(BasePlugin):
    def update_connection_config(self, creds: Any, config: dict[str, Any]) -> None:
        # dbt-duckdb calls this just before it opens `creds.path`, and opens it as given:
        # the file is DuckDB's main database, as when the profile named it, so a path is
        # a literal whatever its characters, and every connection of this process to the
        # file shares its DuckDB instance (benchmarks/dbt_bench.py reads that instance's
        # logs). The credentials then differ from the next command's, so dbt-duckdb never
        # keeps this instance for a command on another data directory.
        creds.path = os.path.join(os.environ.get(DATA_DIR_ENV, DEFAULT_DATA_DIR), DATABASE_FILE)
