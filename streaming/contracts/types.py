"""The DynamoDB types a contract may declare, and what each becomes in every engine: one table.

`DYNAMODB_TYPES` is the one list of type codes. Loading (loader.py, through model.py)
accepts its codes; spark_schema.py types the raw columns from `spark_sql_type`, and
duckdb_schema.py from `duckdb_type` for scaffold (the dbt sources' types) and reconcile
(its DuckDB comparison); contract inference checks sampled values with `well_formed`;
contract_casts.py allows the `casts` listed here. tests/contracts/test_types.py holds every
renderer to this table, so that adding a type means a row here, its decoding
(streaming/pipeline/attributes.py) and sample values (streaming/samples/generator.py).

Pure Python, as model.py: the CDK app and the CLI read contracts where Spark is absent.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A number as DynamoDB writes it in an N value: up to 38 digits, optionally with an exponent.
_DYNAMODB_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class DynamoDBType:
    """One type descriptor of DynamoDB JSON (`{"N": "12.50"}`) and its raw column."""

    code: str
    # What the descriptor holds in DynamoDB JSON, as contract inference tells the user,
    # and the check of a sampled value against it.
    content: str
    well_formed: Callable[[Any], bool]
    # The raw value's type (each element's, for a set) in Spark SQL and in DuckDB; None
    # for L and M, whose types are built from their items or fields.
    spark_sql_type: str | None
    duckdb_type: str | None
    # Unordered elements, an array in raw: compared sorted.
    is_set: bool = False
    # DynamoDB allows it for a partition or sort key.
    is_key: bool = False
    # Raw keeps the descriptor's text as it came (numbers are not parsed): it can be cast
    # in staging and is pseudonymised as text.
    is_exact_text: bool = False
    # The descriptor holds base64 text (each element's, for a set); raw holds its bytes.
    is_base64: bool = False
    # The `cast:` kinds (model.parse_cast) staging may apply to the raw text.
    casts: tuple[str, ...] = ()
    # L (items) and M (fields) hold declared values of their own.
    is_nested: bool = False


def _is_text(content: Any) -> bool:
    return isinstance(content, str)


def _is_number_text(content: Any) -> bool:
    return isinstance(content, str) and bool(_DYNAMODB_NUMBER.fullmatch(content.strip()))


def _is_text_set(content: Any) -> bool:
    """A set's content: a non-empty list of strings (DynamoDB has no empty set)."""
    return isinstance(content, list) and bool(content) and all(isinstance(element, str) for element in content)


def _is_number_set(content: Any) -> bool:
    return _is_text_set(content) and all(_is_number_text(element) for element in content)


STRING = DynamoDBType("S", "a JSON string", _is_text, "string", "varchar",
                      is_key=True, is_exact_text=True, casts=("timestamp", "date"))
NUMBER = DynamoDBType("N", "a number written as a JSON string", _is_number_text, "string", "varchar",
                      is_key=True, is_exact_text=True, casts=("bigint", "decimal"))
BINARY = DynamoDBType("B", "base64 text", _is_text, "binary", "blob", is_key=True, is_base64=True)
BOOLEAN = DynamoDBType("BOOL", "true or false", lambda content: isinstance(content, bool), "boolean", "boolean")
STRING_SET = DynamoDBType("SS", "a non-empty list of strings", _is_text_set, "string", "varchar", is_set=True)
NUMBER_SET = DynamoDBType("NS", "a non-empty list of numbers written as strings", _is_number_set, "string", "varchar",
                          is_set=True)
BINARY_SET = DynamoDBType("BS", "a non-empty list of base64 texts", _is_text_set, "binary", "blob",
                          is_set=True, is_base64=True)
MAP = DynamoDBType("M", "a JSON object", lambda content: isinstance(content, dict), None, None, is_nested=True)
LIST = DynamoDBType("L", "a JSON list", lambda content: isinstance(content, list), None, None, is_nested=True)

DYNAMODB_TYPES: dict[str, DynamoDBType] = {
    kind.code: kind for kind in (STRING, NUMBER, BINARY, BOOLEAN, STRING_SET, NUMBER_SET, BINARY_SET, MAP, LIST)
}
ATTRIBUTE_TYPES = frozenset(DYNAMODB_TYPES)
KEY_TYPES = frozenset(code for code, kind in DYNAMODB_TYPES.items() if kind.is_key)

