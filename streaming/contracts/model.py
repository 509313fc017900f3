"""Table contracts: how one DynamoDB table lands in the raw layer, as plain data.

One file describes one DynamoDB table. A plain table lands in one raw table. A
single-table design declares `entities`: each entity has its own raw table, a match
rule (`Route`) on the item's keys and/or an attribute, and its own attributes; items
matching no entity land in the table's unrouted raw table. Loading (loader.py) expands
such a file into one `TableContract` per raw table, so everything downstream (decode,
sinks, dbt, operations) deals with raw tables only.

Pure Python on purpose: the CDK app, dbt's helpers and the CLI read contracts where
Spark is not installed or not wanted. The Spark types of these columns are in
spark_schema.py, the only module of `streaming.contracts` that imports pyspark.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

# The codes an attribute's `type` may be, and those DynamoDB allows for partition and
# sort keys, here for the loader and contract inference: the one table of them is types.py.
from streaming.contracts.types import ATTRIBUTE_TYPES as ATTRIBUTE_TYPES
from streaming.contracts.types import KEY_TYPES as KEY_TYPES
from streaming.errors import OperatorError

# The raw table of a single-table design's items that match no entity: `<table>_unrouted`.
UNROUTED_SUFFIX = "_unrouted"
# The unrouted table's one extra column: the change record as it arrived (JSON text),
# so that its items can be routed again once the contract names their entity.
CHANGE_RECORD_COLUMN = "_change_record"

# The SQL types staging casts to (`cast:`): timestamp and date for ISO-8601 text (S),
# bigint and decimal(p,s) for numbers (N). dbt reads them through
# streaming/operations/contract_casts.py, which also checks each fits its attribute's type
# (not when loading: a type change with its cast left over must reach the evolution
# check, which refuses it with the way to reprocess). Precision is at most 38, the
# digits of a DynamoDB number and the widest decimal of Athena and DuckDB.
CAST_TYPES = ("timestamp", "date", "bigint", "decimal(p,s)")
MAX_DECIMAL_PRECISION = 38
_DECIMAL_CAST = re.compile(r"^decimal\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)$")


@dataclass(frozen=True)
class MetadataColumn:
    """A column the pipeline adds to every raw table: its Spark SQL type and what it holds
    (the dbt sources' column description)."""

    name: str
    sql_type: str
    description: str


# Columns every raw table carries after the business and partition columns, the one list
# of them: spark_schema.METADATA_FIELDS builds the StructFields from it, scaffold writes
# the dbt sources' columns from it, and tests/dbt/test_scaffold.py checks the hand-written
# _dynamodb__sources.yml against it. `_ingested_at` and `_batch_id` are added by the
# pipeline, not by decode.
METADATA_COLUMN_SPECS: tuple[MetadataColumn, ...] = (
    MetadataColumn("_event_name", "string", "INSERT, MODIFY or REMOVE."),
    MetadataColumn("_is_deleted", "boolean", "True for REMOVE."),
    MetadataColumn("_is_ttl_delete", "boolean", "REMOVE issued by DynamoDB TTL."),
    MetadataColumn("_event_ts", "timestamp", "ApproximateCreationDateTime (UTC)."),
    MetadataColumn("_sequence_number", "string", "Sequence number left-padded with zeros."),
    MetadataColumn("_ordering_value", "string", "Event time digits + sequence number: one comparable string."),
    MetadataColumn("_event_id", "string", "eventID."),
    MetadataColumn("_source_table", "string", "DynamoDB table name."),
    MetadataColumn("_extra_attributes", "string", "Attributes the contract does not name (DynamoDB JSON)."),
    MetadataColumn("_ingested_at", "timestamp", "When the micro-batch was processed."),
    MetadataColumn("_batch_id", "bigint", "Micro-batch id."),
    MetadataColumn("_contract_version", "string", "Version of the table contract the row was decoded with "
                                                  "(streaming/contracts/evolution.py)."),
)
PIPELINE_COLUMNS = ("_ingested_at", "_batch_id", "_contract_version")
METADATA_COLUMNS = tuple(column.name for column in METADATA_COLUMN_SPECS)

# The change log `<raw_table>_changes` is partitioned by the UTC hour its batch was
# ingested (`yyyy-MM-dd-HH`, fixed width so text order is time order): a reader of
# "changes ingested since T" touches only the partitions from T's hour on.
CHANGES_SUFFIX = "_changes"
INGEST_HOUR_COLUMN = "_ingest_hour"
INGEST_HOUR_FORMAT = "yyyy-MM-dd-HH"
INGEST_HOUR = MetadataColumn(INGEST_HOUR_COLUMN, "string",
                             "Partition: UTC hour the batch was ingested (yyyy-MM-dd-HH).")
# The metadata columns of a change log, in its column order: the partition column last.
CHANGE_LOG_METADATA_COLUMNS = (*METADATA_COLUMN_SPECS, INGEST_HOUR)


def ingest_hour(ingested_at: datetime) -> str:
    """The change-log partition of a batch ingested at `ingested_at` (INGEST_HOUR_FORMAT, UTC)."""
    return ingested_at.astimezone(timezone.utc).strftime("%Y-%m-%d-%H")


class ContractError(OperatorError, ValueError):
    """A table contract is invalid; the message names the file and the field."""


@dataclass(frozen=True)
class AttributeSpec:
    """One DynamoDB attribute (or a nested M field / L item) and its raw column."""

    name: str
    column: str
    type: str
    cast: str | None = None
    pii: bool = False
    description: str = ""
    items: AttributeSpec | None = None
    fields: tuple[AttributeSpec, ...] = ()


# The most M and L levels one declared attribute may nest, itself counted (nesting_depth).
# DynamoDB allows 32 levels in an item, so an attribute can nest 31; the raw tables'
# readers cannot all follow. hudi-rs (PyPI `hudi` 0.5, as dbt, status and reconcile read
# the raw tables) parses a table's Avro schema with serde_json, which refuses JSON nested
# more than 128 arrays and objects deep: each map level costs four (the field, its type
# union, the record, its field list), each list level two. Measured on Hudi tables written
# by the sink: 30 levels of maps read, 31 fail ("Failed to parse Avro schema"), and with
# them every reader of the table. Athena and Glue document no nesting limit, only the
# length of a column's type text (131,072 characters,
# https://docs.aws.amazon.com/glue/latest/webapi/API_Column.html). Deeper values stay
# undeclared: they land in `_extra_attributes` as DynamoDB JSON.
MAX_NESTING_DEPTH = 30


def nesting_depth(spec: AttributeSpec) -> int:
    """The M and L levels on the way to an attribute's deepest declared value, its own
    included: 0 for a scalar or a set, 1 for a map of scalars, 2 for a list of such maps."""
    if spec.type == "L" and spec.items is not None:
        return 1 + nesting_depth(spec.items)
    if spec.type == "M":
        return 1 + max((nesting_depth(field) for field in spec.fields), default=0)
    return 0


@dataclass(frozen=True)
class Route:
    """Which items of a DynamoDB table belong to an entity: every condition given holds.

    Prefixes are of the key attributes' string values (`USER#` matches `USER#u7`);
    `sort_key_equals` is the whole sort key, for the designs that keep an item's own
    record under one constant sort key (`PROFILE`, `METADATA`, `A`), where a prefix `A`
    would also take `ADDRESS#1`; `attribute` = `equals` compares an S attribute of the
    item image (a REMOVE's OldImage).
    """

    partition_key_prefix: str | None = None
    sort_key_prefix: str | None = None
    attribute: str | None = None
    equals: str | None = None
    sort_key_equals: str | None = None

    def may_overlap(self, other: Route) -> bool:
        """Whether one item could match both routes: no condition of one excludes the other's."""
        pk_mine, pk_theirs = self.partition_key_prefix, other.partition_key_prefix
        if pk_mine is not None and pk_theirs is not None and not (
                pk_mine.startswith(pk_theirs) or pk_theirs.startswith(pk_mine)):
            return False
        if _sort_keys_exclusive(self, other):
            return False
        return not (self.attribute is not None and self.attribute == other.attribute and self.equals != other.equals)

    def describe(self) -> str:
        conditions = [
            f"{name} starts with {prefix!r}"
            for name, prefix in (("partition key", self.partition_key_prefix), ("sort key", self.sort_key_prefix))
            if prefix is not None
        ]
        if self.sort_key_equals is not None:
            conditions.append(f"sort key is {self.sort_key_equals!r}")
        if self.attribute is not None:
            conditions.append(f"{self.attribute} = {self.equals!r}")
        return " and ".join(conditions)


def _sort_keys_exclusive(first: Route, second: Route) -> bool:
    """Whether the sort-key conditions of two routes exclude each other: two prefixes of
    which neither starts the other, two different whole keys, or a whole key the other's
    prefix does not start."""
    if first.sort_key_equals is not None and second.sort_key_equals is not None:
        return first.sort_key_equals != second.sort_key_equals
    for exact, prefix in ((first.sort_key_equals, second.sort_key_prefix),
                          (second.sort_key_equals, first.sort_key_prefix)):
        if exact is not None and prefix is not None:
            return not exact.startswith(prefix)
    mine, theirs = first.sort_key_prefix, second.sort_key_prefix
    return mine is not None and theirs is not None and not (mine.startswith(theirs) or theirs.startswith(mine))


@dataclass(frozen=True)
class TableContract:
    """One raw table: a plain DynamoDB table, one entity of a single-table design, or
    the items of such a table that match no entity (`unrouted`)."""

    table: str
    raw_table: str
    description: str
    partition_key: str
    sort_key: str | None
    attributes: tuple[AttributeSpec, ...]
    partition_column: str
    partition_expression: str
    # The entity's name and match rule; None for a plain table and the unrouted one.
    entity: str | None = None
    route: Route | None = None
    # The remainder of a single-table design: the items its entities' routes do not match.
    unrouted: bool = False

    @property
    def is_routed(self) -> bool:
        """Whether the DynamoDB table's items are split between several raw tables."""
        return self.route is not None or self.unrouted

    @property
    def key_attributes(self) -> tuple[str, ...]:
        """DynamoDB names of the primary key: partition key, then sort key."""
        return (self.partition_key,) if self.sort_key is None else (self.partition_key, self.sort_key)

    @property
    def changes_table(self) -> str:
        """The change log's name: every distinct change, beside the current state `raw_table`."""
        return self.raw_table + CHANGES_SUFFIX

    @property
    def key_columns(self) -> tuple[str, ...]:
        return tuple(self.attribute(name).column for name in self.key_attributes)

    @property
    def business_columns(self) -> tuple[str, ...]:
        return tuple(spec.column for spec in self.attributes)

    @property
    def pii_columns(self) -> tuple[str, ...]:
        return tuple(spec.column for spec in self.attributes if spec.pii)

    def attribute(self, name: str) -> AttributeSpec:
        for spec in self.attributes:
            if spec.name == name:
                return spec
        raise KeyError(f"table {self.table!r} has no attribute {name!r}")


def contracts_of_table(contracts: Mapping[str, TableContract], table: str) -> dict[str, TableContract]:
    """The raw tables of one DynamoDB table (one, or its entities and unrouted table)."""
    return {name: contract for name, contract in contracts.items() if contract.table == table}


def parse_cast(cast: str) -> tuple[str, int, int] | None:
    """`decimal(18,2)` -> ("decimal", 18, 2), `bigint` -> ("bigint", 0, 0); None when not a known cast."""
    decimal = _DECIMAL_CAST.match(cast)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if 1 <= precision <= MAX_DECIMAL_PRECISION and scale <= precision:
            return ("decimal", precision, scale)
        return None
    if cast in ("timestamp", "date", "bigint"):
        return (cast, 0, 0)
    return None

