"""The raw tables' Spark schemas, and the partition check that needs a Spark session.

The only module of `streaming.contracts` that imports pyspark: model.py and loader.py
stay importable where Spark is absent (the CDK app, the CLI's start). `raw_schema` is
the single definition of the raw table's columns that decode, the sinks and dbt follow.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import types as T

from streaming.contracts.model import (
    CHANGE_RECORD_COLUMN,
    INGEST_HOUR_COLUMN,
    METADATA_COLUMN_SPECS,
    AttributeSpec,
    ContractError,
    TableContract,
)
from streaming.contracts.types import DYNAMODB_TYPES, LIST, MAP

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The Spark SQL type names of the metadata columns (model.py) and of the DynamoDB types' values (types.py).
_SPARK_SQL_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "boolean": T.BooleanType(),
    "timestamp": T.TimestampType(),
    "bigint": T.LongType(),
}
METADATA_FIELDS: tuple[T.StructField, ...] = tuple(
    T.StructField(column.name, _SPARK_SQL_TYPES[column.sql_type]) for column in METADATA_COLUMN_SPECS
)


def spark_type(spec: AttributeSpec) -> T.DataType:
    """The raw column type of an attribute (numbers stay exact strings)."""
    if spec.type == LIST.code:
        assert spec.items is not None  # guaranteed by validation
        return T.ArrayType(spark_type(spec.items))
    if spec.type == MAP.code:
        return T.StructType([T.StructField(field.column, spark_type(field)) for field in spec.fields])
    kind = DYNAMODB_TYPES[spec.type]
    assert kind.spark_sql_type is not None  # every type but L and M has one (tests/contracts/test_types.py)
    value = _SPARK_SQL_TYPES[kind.spark_sql_type]
    return T.ArrayType(value) if kind.is_set else value


def raw_schema(contract: TableContract) -> T.StructType:
    """The raw table's schema: business columns, partition column, metadata columns.

    The partition column is a string: Hive-style partition values are text anyway,
    and decode casts the partition expression's result to match.
    """
    business = [T.StructField(spec.column, spark_type(spec)) for spec in contract.attributes]
    partition = T.StructField(contract.partition_column, T.StringType())
    record = [T.StructField(CHANGE_RECORD_COLUMN, T.StringType())] if contract.unrouted else []
    return T.StructType([*business, partition, *record, *METADATA_FIELDS])


def change_log_schema(contract: TableContract) -> T.StructType:
    """The change log's schema: the raw table's columns plus the ingest-hour partition."""
    return T.StructType([*raw_schema(contract).fields, T.StructField(INGEST_HOUR_COLUMN, T.StringType())])


def check_partition_expression(spark: SparkSession, contract: TableContract, *, evaluate: bool = True) -> None:
    """The partition expression, analysed by Spark on a row holding only the key columns:
    it may read nothing else, and must be deterministic; with `evaluate` (at start-up) it
    is also computed once on a sample key.

    A REMOVE record carries nothing but its keys, so an expression that reads any
    other column would put tombstones in a different partition than their item. The
    decoder checks without `evaluate`, once per contract and process.
    """
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    samples = {"S": "'sample-key-1'", "N": "'1'", "B": "X'01'"}
    key_specs = [contract.attribute(name) for name in contract.key_attributes]
    values = ", ".join(f"cast({samples[spec.type]} as {spark_type(spec).simpleString()})" for spec in key_specs)
    names = ", ".join("`" + spec.column.replace("`", "``") + "`" for spec in key_specs)
    try:
        # An inline table, not createDataFrame: Spark's optimizer computes a projection of
        # one by itself, so the evaluation runs no job (a job per contract cost a stream's
        # start-up about half a second each).
        frame = spark.sql(f"select * from values ({values}) as key_columns({names})")
        partition = frame.select(F.expr(contract.partition_expression).cast("string"))
        # Asked of the analyzed expression: before analysis every function call is an
        # unresolved one, which reports itself deterministic whatever it calls.
        if not partition._jdf.queryExecution().analyzed().expressions().head().deterministic():
            raise ContractError(
                f"contract {contract.table!r}: partitioning.expression {contract.partition_expression!r} "
                "is not deterministic (Spark says so): a key must get the same partition every time"
            )
        if evaluate:
            partition.collect()
    except PySparkException as exc:
        raise ContractError(
            f"contract {contract.table!r}: partitioning.expression {contract.partition_expression!r} "
            f"may use only the key columns {list(contract.key_columns)}: {exc}"
        ) from exc
