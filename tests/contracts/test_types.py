"""The one table of DynamoDB types (streaming/contracts/types.py) and the engines that render it:
every code has a raw type in Spark and in DuckDB and the two agree, reconcile reads every
code's DynamoDB JSON as that DuckDB type, inference's checks accept each code's values, and
DuckDB struct types keep field names that need quoting."""
from __future__ import annotations

import json
from typing import Any

import duckdb
import pytest
from sqlglot import exp

from streaming.contracts.model import AttributeSpec
from streaming.contracts.spark_schema import spark_type
from streaming.contracts.duckdb_schema import duckdb_name, duckdb_type
from streaming.contracts.types import ATTRIBUTE_TYPES, DYNAMODB_TYPES, KEY_TYPES
from streaming.operations.reconcile import _export_value

# One DynamoDB JSON value of every code, as a stream record or an export holds it.
SAMPLE_CONTENT: dict[str, Any] = {
    "S": "text",
    "N": "12.50",
    "B": "AQI=",
    "BOOL": True,
    "SS": ["b", "a"],
    "NS": ["2", "1.5"],
    "BS": ["Ag==", "AQ=="],
    "M": {"street": {"S": "Main"}},
    "L": [{"S": "first"}],
}


def _spec(code: str) -> AttributeSpec:
    """An attribute of type `code`: a list of strings for L, a map of one string for M."""
    if code == "L":
        return AttributeSpec("tags", "tags", "L", items=AttributeSpec("tags", "tags", "S"))
    if code == "M":
        return AttributeSpec("address", "address", "M", fields=(AttributeSpec("street", "street", "S"),))
    return AttributeSpec("value", "value", code)


def _parsed(con: duckdb.DuckDBPyConnection, type_text: str) -> duckdb.typing.DuckDBPyType:
    return con.sql(f"select cast(null as {type_text}) as value").types[0]


def test_the_table_holds_every_code_a_contract_may_declare():
    assert set(SAMPLE_CONTENT) == set(DYNAMODB_TYPES) == ATTRIBUTE_TYPES
    assert KEY_TYPES == {"S", "N", "B"}
    for code, kind in DYNAMODB_TYPES.items():
        assert kind.code == code
        # L and M are built from their items or fields; every other type names its raw type.
        assert (kind.spark_sql_type is None) == (kind.duckdb_type is None) == kind.is_nested


@pytest.mark.parametrize("code", sorted(DYNAMODB_TYPES))
def test_every_code_has_one_raw_type_in_spark_and_duckdb(code: str):
    spec = _spec(code)
    con = duckdb.connect()
    # Spark's type, written in DuckDB's syntax by sqlglot, is the type scaffold and reconcile use.
    spark_in_duckdb = exp.DataType.build(spark_type(spec).simpleString(), dialect="spark").sql("duckdb")
    assert _parsed(con, duckdb_type(spec)) == _parsed(con, spark_in_duckdb)


@pytest.mark.parametrize("code", sorted(DYNAMODB_TYPES))
def test_reconcile_reads_every_code_from_dynamodb_json_as_its_duckdb_type(code: str):
    spec = _spec(code)
    con = duckdb.connect()
    con.execute("create table item as select ?::json as descriptor", [json.dumps({code: SAMPLE_CONTENT[code]})])
    (value_type,) = con.sql(f"select {_export_value(spec, 'descriptor')} as value from item").types
    assert value_type == _parsed(con, duckdb_type(spec))


@pytest.mark.parametrize("code", sorted(DYNAMODB_TYPES))
def test_inference_says_and_accepts_each_codes_values(code: str):
    kind = DYNAMODB_TYPES[code]
    assert kind.content
    assert kind.well_formed(SAMPLE_CONTENT[code])
    assert not kind.well_formed(None)


def test_duckdb_struct_types_quote_the_field_names_duckdb_cannot_read_bare():
    names = ["plain_name", "a b", 'say "hi"', "x.y", "order", "Mixed"]
    spec = AttributeSpec("lines", "lines", "L", items=AttributeSpec(
        "line", "line", "M", fields=tuple(AttributeSpec(name, name, "N") for name in names)))
    con = duckdb.connect()
    members = ", ".join(f"{duckdb_name(name)} := '{position}'" for position, name in enumerate(names))
    (value,) = con.execute(f"select cast([struct_pack({members})] as {duckdb_type(spec)}) as value").fetchone()
    assert value == [{name: str(position) for position, name in enumerate(names)}]
    assert duckdb_name("plain_name") == "plain_name"
    assert duckdb_name('say "hi"') == '"say ""hi"""'


def test_every_duckdb_keyword_is_read_as_a_struct_field_name():
    # The names duckdb_name leaves bare are exactly those DuckDB's grammar takes bare.
    con = duckdb.connect()
    keywords = [row[0] for row in con.sql("select keyword_name from duckdb_keywords()").fetchall()]
    for keyword in keywords:
        field_type = _parsed(con, f"struct({duckdb_name(keyword)} varchar)")
        assert [name for name, _ in field_type.children] == [keyword]
