"""dbt-duckdb plugin (profiles.yml, target `local`): gives every dbt cursor the PII
key's HMAC pad blocks as DuckDB variables, bound as query parameters.

dbt renders and stores every model's SQL (target/compiled, target/run, manifest.json)
and logs it, and scrubs only DBT_ENV_SECRET_* variables, which it refuses in models.
So the key never passes through Jinja: the plugin reads it in Python
(lakehouse_dbt.pii_key.resolve_key) and the SQL names the variables only. DuckDB
variables live in the connection, not the database file.

No key: the variables stay unset and the on-run-start check require_pii_key fails
`dbt run`/`dbt build` with a message saying where the key comes from.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from lakehouse_dbt.pii_key import INNER_PAD_VARIABLE, OUTER_PAD_VARIABLE, hmac_pads, resolve_key


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        key = resolve_key()
        self._pads = hmac_pads(key) if key is not None else None

    def configure_cursor(self, cursor: Any) -> None:
        # DuckDB variables belong to one connection; each dbt cursor is its own.
        if self._pads is None:
            return
        inner, outer = self._pads
        cursor.execute(f"set variable {INNER_PAD_VARIABLE} = ?", [inner])
        cursor.execute(f"set variable {OUTER_PAD_VARIABLE} = ?", [outer])
