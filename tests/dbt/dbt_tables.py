"""Reads dbt's tables in a local DuckDB file, for before/after comparisons."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import duckdb

from lakehouse_dbt.pii_key import KEY_ENV

# Every table dbt materializes (views are recomputed on read, so not compared), but
# mart_freshness: its built_at differs between any two builds.
TABLES = (
    "lakehouse_staging.stg_dynamodb__customers",
    "lakehouse_staging.stg_dynamodb__orders",
    "lakehouse_marts.dim_customers",
    "lakehouse_marts.dim_customers_history",
    "lakehouse_marts.fct_orders",
    "lakehouse_marts.fct_order_lines",
    "lakehouse_marts.agg_daily_customer_activity",
    "lakehouse_marts.agg_daily_revenue_by_status",
)


def query(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        return con.sql(sql).fetchall()


def table_rows(data_dir: Path, table: str) -> set[tuple]:
    """All rows of a table; lists and structs as their repr so that rows are hashable."""
    return {
        tuple(repr(v) if isinstance(v, (list, dict)) else v for v in row)
        for row in query(data_dir, f"select * from {table}")
    }


def all_tables(data_dir: Path) -> dict[str, set[tuple]]:
    return {table: table_rows(data_dir, table) for table in TABLES}


def pseudonym(label: str, text: str) -> str:
    """The marts' keyed pseudonym of `text` (macros/pii/pseudonymize.sql) under the
    session's key (conftest.py), computed with Python's hmac."""
    return hmac.new(os.environ[KEY_ENV].encode(), f"{label}:{text}".encode(), hashlib.sha256).hexdigest()
