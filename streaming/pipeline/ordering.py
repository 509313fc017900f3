"""De-duplicate change events and pick the latest change per record key.

Kinesis Data Streams for DynamoDB may deliver a change twice and out of order, so
the winner per key is decided by `_ordering_value` (event time, then the padded
sequence number, then the eventID), never by arrival order. Two distinct changes never
have equal ordering values (envelope._tie_breaker), so "the greatest wins" is the whole
rule, the same in Spark, Hudi, DuckDB and Athena.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.contracts.model import TableContract

_ROW = "__row"
_UNMERGED = "__unmerged"


def ordering_columns(contract: TableContract) -> list[str]:
    """The columns `drop_duplicate_events` groups and orders by: on these alone it keeps
    as many rows as on the whole change."""
    return [*contract.key_columns, "_event_id", "_ordering_value"]


def drop_duplicate_events(df: DataFrame, contract: TableContract) -> DataFrame:
    """One row per `_event_id`, hash-partitioned by the record key.

    Copies of one event can differ in their Kinesis sequence number; the copy with
    the smallest `_ordering_value` (the first delivery) is kept, so the result does
    not depend on arrival order. Copies that tie on it (one eventID and time sent with
    different content, which DynamoDB never does) are told apart by their content: the
    row that sorts first, column by column in the raw table's order, is kept. Rows
    without an event id are never merged.

    Every copy of a change carries its item's key, so the rows are shuffled once, by
    the key, and de-duplicated within it: `latest_per_key` on the result then needs
    no shuffle of its own.
    """
    keys = list(contract.key_columns)
    # Null for rows with an event id; a value of its own for each row without one.
    unmerged = F.when(F.col("_event_id").isNull(), F.monotonically_increasing_id()).alias(_UNMERGED)
    # The minimum of a struct compares field by field: `_ordering_value` first, then the
    # rest only where it ties (every raw column type is orderable: no maps).
    rest = [name for name in df.columns if name != "_ordering_value"]
    first_copies = (
        df.repartition(*keys)
        .groupBy(*keys, "_event_id", unmerged)
        .agg(F.min(F.struct("_ordering_value", *rest)).alias(_ROW))
    )
    # The key columns are taken from the grouping, not the struct, so that the
    # output still counts as partitioned by them.
    return first_copies.select(*[F.col(name) if name in keys else F.col(f"{_ROW}.{name}") for name in df.columns])


def latest_per_key(df: DataFrame, contract: TableContract) -> DataFrame:
    """One row per primary key: the one with the greatest `_ordering_value`.

    Rows with equal values are copies of one change (drop_duplicate_events leaves one).

    An aggregation rather than a `row_number()` window: both sort, both cut rows down
    before the shuffle (partial `max_by` / Spark 3.5's WindowGroupLimit), and the
    aggregation measured about 20% faster locally (400k events, 20k keys).
    """
    keys = list(contract.key_columns)
    return (
        df.groupBy(*keys)
        .agg(F.max_by(F.struct(*df.columns), F.col("_ordering_value")).alias(_ROW))
        .select(f"{_ROW}.*")
    )
