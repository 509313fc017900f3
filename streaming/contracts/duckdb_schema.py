"""The raw tables' DuckDB column types, from the one table of DynamoDB types (types.py).

The DuckDB twin of spark_schema.py: scaffold types the dbt sources' columns with it (they
type the empty view of a change log without files, macros/raw/register_raw_sources.sql)
and reconcile its comparison of a source of truth with a result. Numbers stay exact text.
"""
from __future__ import annotations

from streaming.contracts.model import AttributeSpec
from streaming.contracts.names import DUCKDB_RESERVED, SQL_NAME
from streaming.contracts.types import DYNAMODB_TYPES, LIST, MAP


def duckdb_type(spec: AttributeSpec) -> str:
    """The raw column type of an attribute in DuckDB."""
    if spec.type == LIST.code:
        assert spec.items is not None  # the contract loader requires items for a list
        return f"{duckdb_type(spec.items)}[]"
    if spec.type == MAP.code:
        return "struct(" + ", ".join(f"{duckdb_name(part.column)} {duckdb_type(part)}" for part in spec.fields) + ")"
    kind = DYNAMODB_TYPES[spec.type]
    assert kind.duckdb_type is not None  # every type but L and M has one (tests/contracts/test_types.py)
    return kind.duckdb_type + ("[]" if kind.is_set else "")


def duckdb_name(name: str) -> str:
    """A struct field name as DuckDB's type syntax takes it: bare when DuckDB reads it so
    (lower snake_case and not one of its reserved words, as every contract column is),
    otherwise in double quotes with its own double quotes doubled (`a "b".c` ->
    `"a ""b"".c"`), as DuckDB itself writes such types."""
    if SQL_NAME.fullmatch(name) and name not in DUCKDB_RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'
