"""Change envelope -> typed raw rows per table + quarantine rows (Spark expressions only).

Four stages, one module each, composed here by `decode_records`: envelope.py parses
each record's envelope, routing.py picks the raw table it lands in (an entity of a
single-table design, or the table's one raw table), attributes.py types its image by
that table's contract, and extras.py keeps what the contract does not name;
`split_by_table` then hands each raw table its rows and the quarantine the rest.

Each payload is parsed once with `from_json`, keeping the item image as JSON text.
The image is then parsed once more, against a schema built from its table's
contract: every attribute becomes a struct holding its declared type's key and
`NULL` (`{"N": "12.50"}` -> `N = "12.50"`). Nothing is inferred from the data, so
an unexpected descriptor is reported, never guessed. An image that does not fit
that schema (a wrong JSON shape somewhere inside) is decoded again one attribute at
a time, from a `map<string,string>` of its descriptors, to name the attribute at
fault; only such rows pay for it.

Nothing the contract does not name is dropped: top-level attributes, and fields
inside declared M values (also inside the M items of a declared L, at any depth),
land in `_extra_attributes`, a JSON object from the field's path to its DynamoDB
JSON descriptor (compact JSON), members sorted by path so the text is deterministic.
A path is a DynamoDB document path: `loyaltyTier` at the top, `shippingAddress.line2`
for a field of an M value, `lineItems[2].discount` for a field of the L item at
(0-based) index 2, deeper levels alike. A name holding `.`, `[`, `]` or `"` is
written as a JSON string in brackets (`["a.b"]`, `shippingAddress["a.b"]`), so two
fields never share a path. The column is null when nothing is undeclared at any
level, and for REMOVE rows (a tombstone keeps no image values); an M value that is
`{"NULL": true}` holds nothing to keep. Only a row whose image holds more object keys
than its typed image accounts for builds the object (extras.py).

Everything a batch needs is computed in one projection, one row out per record in:
its table, its quarantine reason, and one struct of raw columns per contract
(filled only for the record's own table). `split_by_table` reads every output from
that one frame.

A record that cannot be decoded goes to quarantine with exactly one reason, the
first that applies in this order:

0. the envelope's `source_error`, when the source found the record broken while
   splitting its file (streaming/io/landing_reader.py: `invalid_json`, `trailing_garbage`,
   `duplicate_key`, `record_too_large`, `unreadable_file`, `unsupported_compression`)
1. `invalid_utf8`            the payload's bytes are not valid UTF-8 (quarantined with
                             each bad sequence replaced by U+FFFD)
2. `invalid_json`            payload null, not JSON, not an object, or an envelope
                             field of the wrong JSON shape (e.g. `"dynamodb": "x"`)
   `lone_surrogate`          a `\\u` escape of a UTF-16 surrogate without its pair
                             anywhere in the record (`\\ud800`): UTF-8 cannot hold it,
                             so it would land as `?` (envelope.py)
3. `no_table_name`           neither `tableName` nor a table ARN in `eventSourceARN`
                             (DynamoDB Streams GetRecords output names no table)
   `unknown_table`           a table name without a contract
4. `unknown_event_name`      eventName is not INSERT, MODIFY or REMOVE
5. `missing_event_time`      ApproximateCreationDateTime absent, not a number, out
                             of range, or with an unknown precision
6. `invalid_sequence_number` a sequence number with non-digits or more than 64 digits
                             (a record with none at all, as Kinesis Data Streams for
                             DynamoDB delivers them through Firehose, orders by event
                             time alone: its sequence number is all zeros)
7. `missing_new_image`       INSERT/MODIFY without NewImage
8. `missing_key:<attr>`      a key attribute absent, NULL or empty (REMOVE: in Keys,
                             else OldImage); partition key first. DynamoDB refuses
                             empty key values, and Hudi's key generators fail the
                             whole write on one (HoodieKeyException)
   `ambiguous_key:<attr>`    a key of several attributes whose string value holds
                             `,<key column>:`: Hudi joins such a key as
                             `<column>:<value>,<column>:<value>` without escaping
                             (KeyGenUtils / BuiltinKeyGenerator), so two items could
                             get one record key and overwrite each other
9. per attribute, in contract order:
   `type_mismatch:<path>:<type>` the descriptor is not the declared type (B also
                                 when the text is not base64)
   `invalid_number:<path>`       an N (or NS element) that is not a DynamoDB number
   `<path>` is the attribute name, `.field` for M fields, `[]` for L items.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache, reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.contracts.model import CHANGE_RECORD_COLUMN, METADATA_COLUMNS, PIPELINE_COLUMNS, TableContract
from streaming.contracts.spark_schema import check_partition_expression, raw_schema
from streaming.pipeline import reasons
from streaming.pipeline.attributes import attribute_error, attribute_value, descriptor, is_missing, typed_image
from streaming.pipeline.envelope import SOURCE_ERROR, Projections, parse_projections, project
from streaming.pipeline.extras import extra_attributes
from streaming.pipeline.routing import route_records

QUARANTINE_COLUMNS = ("_source_table", "reason", "payload", "source_ref")
# The raw table a record's item moved out of (routing.py), which gets a tombstone; else null.
MOVED_FROM = "_moved_from"
# A tombstone beside the change it retires (tombstone_columns) follows the change's
# ordering value with this: it sorts below every hex digit and "~", so nothing real sorts
# between the two; and its eventID is this prefix and the change's ordering value.
RETIRING_ORDERING_SUFFIX = "-"
RETIRING_EVENT_ID_PREFIX = "rerouted:"
# Metadata columns every table shares, straight from the parsed record.
_SHARED_METADATA = tuple(
    name for name in METADATA_COLUMNS if name not in PIPELINE_COLUMNS and name != "_extra_attributes"
)


def decode_batch(envelope: DataFrame, contracts: Mapping[str, TableContract]) -> tuple[dict[str, DataFrame], DataFrame]:
    """Decode a micro-batch of change envelopes: `split_by_table` of `decode_records`.

    The decoded frame is only fenced here, so that the filters on `reason` are not
    pushed into the parsing (which would run `from_json` again for every reference).
    A caller computing several outputs per batch keeps the decoded records instead
    (`decoded_and_kept`; process_batch keeps them itself), so each record is parsed and
    decoded once.
    """
    return split_by_table(_evaluate_once(decode_records(envelope, contracts)), contracts)


@contextmanager
def decoded_and_kept(
    envelope: DataFrame, contracts: Mapping[str, TableContract]
) -> Iterator[tuple[dict[str, DataFrame], DataFrame]]:
    """`decode_batch`'s outputs for a caller reading several of them: the decoded records
    kept apart from their plan (`kept_apart_from_its_plan`), so that each record is
    decoded once whatever is read, and released when the block ends."""
    kept = kept_apart_from_its_plan(decode_records(envelope, contracts))
    try:
        yield split_by_table(kept, contracts)
    finally:
        release_kept(kept)


def split_by_table(
    decoded: DataFrame, contracts: Mapping[str, TableContract]
) -> tuple[dict[str, DataFrame], DataFrame]:
    """The decoded rows per DynamoDB table name (every contract has an entry, with the
    raw schema minus `_ingested_at`/`_batch_id`) and the quarantine rows
    (`_source_table`, `reason`, `payload`, `source_ref`) of a `decode_records` frame.
    Every record lands in exactly one of them.
    """
    return {table: table_rows(decoded, contracts, table) for table in contracts}, invalid_rows(decoded)


def table_rows(decoded: DataFrame, contracts: Mapping[str, TableContract], table: str) -> DataFrame:
    """One raw table's rows of a `decode_records` frame, as `split_by_table` gives them.

    The frame must be kept (cached, checkpointed) or fenced (`decode_batch`): over the bare
    decode plan Spark pushes this filter into the projections, and planning that once ran
    out of a 1 GB heap.
    """
    return valid_rows(decoded, contracts[table], _table_column(list(contracts).index(table)))


def decode_records(envelope: DataFrame, contracts: Mapping[str, TableContract]) -> DataFrame:
    """One row per envelope row: `_source_table`, `reason` (null when the record is
    valid), `payload` (only when it is not), `_unusable_view_type` (a contract's record
    from a KEYS_ONLY or OLD_IMAGE stream, see envelope.py), `source_ref` (when either is
    set), and for the i-th contract a struct column `_table_column(i)` with the record's
    raw columns (null unless the record belongs to that table). The partition column is
    added later, per table, by `valid_rows`.
    """
    given = tuple(contracts.items())
    for _, contract in given:
        _check_partition_expression_once(envelope.sparkSession, contract)
    return project(envelope, decode_projections(given, SOURCE_ERROR in envelope.columns))


# Keyed by contract, not by session: each streaming query hands foreachBatch a session
# of its own, and the expression's analysis does not depend on which one it is.
_PARTITION_EXPRESSIONS_CHECKED: set[TableContract] = set()


def _check_partition_expression_once(spark: SparkSession, contract: TableContract) -> None:
    if contract not in _PARTITION_EXPRESSIONS_CHECKED:
        check_partition_expression(spark, contract, evaluate=False)
        _PARTITION_EXPRESSIONS_CHECKED.add(contract)


@lru_cache(maxsize=8)
def decode_projections(contracts: tuple[tuple[str, TableContract], ...], has_source_error: bool) -> Projections:
    """The projections `decode_records` applies, built once per set of contracts.

    They are expressions only, independent of any batch's data and of the session
    (JVM Column objects name their inputs, they are bound to a plan only when
    selected). Building them takes thousands of calls into the JVM for the packaged
    contracts, seconds, more than Spark's analysis of them: a process builds them for
    its first micro-batch only, every later batch and stream of it reuses them.
    """
    tables = [contract for _, contract in contracts]
    names = [name for name, _ in contracts]
    parsing = parse_projections({contract.table for contract in tables}, has_source_error)
    route_values, routing = route_records(dict(contracts))
    # Whether the record lands in the i-th raw table, and whether it moves its item out of
    # it (routing.py); computed once per record, each read many times below.
    routes = (
        F.col("*"),
        *route_values,
        *[routing.lands[name].alias(_lands_column(index)) for index, name in enumerate(names)],
        *[routing.leaves[name].alias(_leaves_column(index)) for index, name in enumerate(names)],
    )
    owned = [F.col(_lands_column(index)) for index in range(len(tables))]
    left = [F.col(_leaves_column(index)) for index in range(len(tables))]
    # Three projections, each reading the previous one's columns: referenced twice in
    # one projection, a parse would run twice.
    is_deleted = F.col("_is_deleted")
    typed = (
        F.col("*"),
        *[
            F.when(own | leaves, typed_image(contract)).alias(_typed_column(index))
            for index, (contract, own, leaves) in enumerate(zip(tables, owned, left))
        ],
    )
    keys = [set(contract.key_attributes) for contract in tables]
    descriptors = (
        *[
            F.col(name)
            for name in ("_source_table", "_record_error", "_unusable_view_type", "payload", "source_ref",
                         *_SHARED_METADATA)
        ],
        *owned,
        *left,
        *[
            descriptor(
                F.col(_typed_column(index)), spec, own | leaves if spec.name in keys[index] else own & ~is_deleted
            ).alias(_descriptor_column(index, position))
            for index, (contract, own, leaves) in enumerate(zip(tables, owned, left))
            for position, spec in enumerate(contract.attributes)
        ],
        *[
            extra_attributes(contract, F.col(_typed_column(index)), own & ~is_deleted).alias(_extras_column(index))
            for index, (contract, own) in enumerate(zip(tables, owned))
        ],
    )
    reason = F.coalesce(
        F.col("_record_error"),
        *[F.when(own, _table_reason(contract, index)) for index, (contract, own) in enumerate(zip(tables, owned))],
    )
    unusable_view_type = F.col("_unusable_view_type")
    decoded = (
        F.col("_source_table"),
        reason.alias("reason"),
        # Only the quarantine needs the payload; valid rows do not carry it further.
        F.when(reason.isNotNull(), F.col("payload")).alias("payload"),
        unusable_view_type,
        F.when(reason.isNotNull() | unusable_view_type.isNotNull(), F.col("source_ref")).alias("source_ref"),
        F.coalesce(
            *[F.when(leaves, F.lit(contract.raw_table)) for contract, leaves in zip(tables, left)],
            F.lit(None).cast("string"),
        ).alias(MOVED_FROM),
        *[
            F.when(own, _table_row(contract, index))
            .when(leaves, F.struct(*tombstone_columns(contract, _key_values(contract, index), beside_change=False)))
            .alias(_table_column(index))
            for index, (contract, own, leaves) in enumerate(zip(tables, owned, left))
        ],
    )
    return (*parsing, routes, typed, descriptors, decoded)


def valid_rows(decoded: DataFrame, contract: TableContract, table_column: str) -> DataFrame:
    """The table's decoded rows without a reason, in the raw schema minus the pipeline columns."""
    kept, partition, typed = _valid_row_columns(contract, table_column)
    return decoded.where(kept).select(f"{table_column}.*").select("*", partition).select(*typed)


@lru_cache(maxsize=64)
def _valid_row_columns(contract: TableContract, table_column: str) -> tuple[Column, Column, tuple[Column, ...]]:
    """`valid_rows`' expressions, built once per table as the decode's are (a few hundred
    calls into the JVM per batch otherwise)."""
    kept = F.col(table_column).isNotNull() & F.col("reason").isNull()
    partition = F.expr(contract.partition_expression).cast("string").alias(contract.partition_column)
    fields = [field for field in raw_schema(contract) if field.name not in PIPELINE_COLUMNS]
    return kept, partition, tuple(F.col(field.name).cast(field.dataType).alias(field.name) for field in fields)


def rows_landing_in(contracts: Mapping[str, TableContract]) -> dict[str, Column]:
    """Per raw table, whether a `decode_records` row lands a row there (the rows `valid_rows` keeps)."""
    return {
        table: F.col(_table_column(index)).isNotNull() & F.col("reason").isNull()
        for index, table in enumerate(contracts)
    }


def invalid_rows(decoded: DataFrame) -> DataFrame:
    return decoded.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def _table_reason(contract: TableContract, index: int) -> Column:
    """The first attribute-level problem of a record of this table, or null."""
    position = {spec.name: number for number, spec in enumerate(contract.attributes)}
    keys = {name: F.col(_descriptor_column(index, position[name])) for name in contract.key_attributes}
    missing_keys = [
        F.when(
            is_missing(key, contract.attribute(name)) | (key[contract.attribute(name).type] == ""),
            reasons.missing_key(name),
        )
        for name, key in keys.items()
    ]
    separators = [f",{column}:" for column in contract.key_columns] if len(keys) > 1 else []
    ambiguous_keys = [
        F.when(reduce(Column.__or__, [key["S"].contains(separator) for separator in separators]),
               reasons.ambiguous_key(name))
        for name, key in keys.items()
        if separators and contract.attribute(name).type == "S"
    ]
    attribute_errors = [
        attribute_error(F.col(_descriptor_column(index, number)), spec, spec.name)
        for number, spec in enumerate(contract.attributes)
    ]
    return F.coalesce(*missing_keys, *ambiguous_keys, *attribute_errors)


def _table_row(contract: TableContract, index: int) -> Column:
    """The raw columns of one record of this table, but the partition column."""
    return F.struct(
        *[
            attribute_value(F.col(_descriptor_column(index, number)), spec).alias(spec.column)
            for number, spec in enumerate(contract.attributes)
        ],
        *_SHARED_METADATA,
        F.col(_extras_column(index)).alias("_extra_attributes"),
        *([F.col("payload").alias(CHANGE_RECORD_COLUMN)] if contract.unrouted else []),
    )


def tombstone_columns(contract: TableContract, keys: Mapping[str, Column], *, beside_change: bool) -> list[Column]:
    """The raw columns of a tombstone, in a decoded row's order, but the partition column
    (computed from the key, as for any row): a REMOVE of the key, at the time of the
    change that retires the key from this table, with no attribute values and no extras.

    `keys` gives each key column's value; the change's `_event_ts`, `_sequence_number`,
    `_ordering_value`, `_source_table`, and unless `beside_change` its `_event_id` and
    `payload`, are read from the frame the columns are selected from.

    Decode makes one in the raw table an item moved out of (routing.py), where the change
    itself does not land: the tombstone is that change's row there, so it takes the
    change's ordering value and eventID, and in an unrouted table keeps its record, by
    which a replay knows the row for a move (a deletion whose record is no REMOVE).

    An unrouted replay (streaming/operations/batches/unrouted_replay.py) makes one `beside_change`: in the
    unrouted table that holds the change it retires. There it must win over that change,
    hence an ordering value just above the change's (RETIRING_ORDERING_SUFFIX; an ordering
    value is fixed-width digits and then hex digits or "~", so any later real change of
    the key still sorts above it); it must not pass for a redelivery of the change, which
    the change log and staging drop by eventID, hence an eventID of its own; and it holds
    no record, so that no replay reads it as a change that arrived.
    """
    if set(keys) != set(contract.key_columns):
        raise ValueError(f"a tombstone of {contract.raw_table} needs its key columns {list(contract.key_columns)}, "
                         f"not {sorted(keys)}")
    if beside_change:
        ordering_value = F.concat(F.col("_ordering_value"), F.lit(RETIRING_ORDERING_SUFFIX))
        event_id = F.concat(F.lit(RETIRING_EVENT_ID_PREFIX), F.col("_ordering_value"))
        change_record = F.lit(None).cast("string")
    else:
        ordering_value, event_id, change_record = F.col("_ordering_value"), F.col("_event_id"), F.col("payload")
    metadata = {"_event_name": F.lit("REMOVE"), "_is_deleted": F.lit(True), "_is_ttl_delete": F.lit(False),
                "_ordering_value": ordering_value, "_event_id": event_id}
    types = {field.name: field.dataType for field in raw_schema(contract).fields}
    return [
        *[keys.get(spec.column, F.lit(None)).cast(types[spec.column]).alias(spec.column)
          for spec in contract.attributes],
        *[metadata.get(name, F.col(name)).alias(name) for name in _SHARED_METADATA],
        F.lit(None).cast("string").alias("_extra_attributes"),
        *([change_record.alias(CHANGE_RECORD_COLUMN)] if contract.unrouted else []),
    ]


def _key_values(contract: TableContract, index: int) -> dict[str, Column]:
    """The key columns of a record of the i-th table, read from its image (a REMOVE's Keys)."""
    return {
        spec.column: attribute_value(F.col(_descriptor_column(index, number)), spec)
        for number, spec in enumerate(contract.attributes)
        if spec.name in contract.key_attributes
    }


def kept_apart_from_its_plan(decoded: DataFrame) -> DataFrame:
    """`decoded` computed by the first job that reads it, kept (in memory, spilling to
    disk) for the later ones, and cut from the plan that computed it; `release_kept`
    frees it.

    A local checkpoint, not a cache: over a cache every later plan (each raw table's rows
    and write, the quarantine's) still holds the decode's projections, hundreds of
    expressions with the packaged contracts, and Spark checks them again in each
    analysis, prints them into each query's plan description and serialises them into
    every task it sends. Over the checkpoint those plans start from the kept rows, and no
    filter reaches into the projections. Three batches of the generator's mix with the
    packaged contracts took 53 s of the driver JVM's CPU this way against 86 s cached.

    The price: rows lost with an executor are not computed again; the job reading them
    fails (process_batch then runs its batch once more).
    """
    return decoded.localCheckpoint(eager=False)


def release_kept(kept: DataFrame) -> None:
    """Free the rows `kept_apart_from_its_plan` stored: they would outlive the DataFrame
    for as long as the session runs. They belong to the RDD under its plan."""
    kept._jdf.queryExecution().analyzed().rdd().unpersist(False)


def _evaluate_once(df: DataFrame) -> DataFrame:
    """Keep later filters (on `reason`, `_source_table`) from being pushed into `df`.

    Pushing a filter through a projection inlines the projected expressions, so each
    reference to a parsed column would run its `from_json` again, per row. The
    optimizer does not push a filter on a generator's output below the generator.
    """
    return df.select(F.inline(F.array(F.struct(*df.columns))))


def _table_column(table_index: int) -> str:
    return f"__table_{table_index}"


def _typed_column(table_index: int) -> str:
    return f"__typed_image_{table_index}"


def _descriptor_column(table_index: int, attribute_index: int) -> str:
    return f"__descriptor_{table_index}_{attribute_index}"


def _extras_column(table_index: int) -> str:
    return f"__extra_attributes_{table_index}"


def _lands_column(table_index: int) -> str:
    return f"__lands_{table_index}"


def _leaves_column(table_index: int) -> str:
    return f"__leaves_{table_index}"


