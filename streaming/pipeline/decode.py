"""Change envelope -> typed raw rows per table + quarantine rows (Spark expressions only).

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
`{"NULL": true}` holds nothing to keep. Every row lists its image's top-level keys
and reads an outline of its declared M values (their field names only); only rows
where these show an undeclared field build the object.

Everything a batch needs is computed in one projection, one row out per record in:
its table, its quarantine reason, and one struct of raw columns per contract
(filled only for the record's own table). `split_records` reads every output from
that one frame.

A record that cannot be decoded goes to quarantine with exactly one reason, the
first that applies in this order:

0. the envelope's `source_error`, when the source found the record broken while
   splitting its file (streaming/io/landing_reader.py: `invalid_json`, `trailing_garbage`,
   `duplicate_key`, `record_too_large`, `unreadable_file`)
1. `invalid_utf8`            the payload's bytes are not valid UTF-8 (quarantined with
                             each bad sequence replaced by U+FFFD)
2. `invalid_json`            payload null, not JSON, not an object, or an envelope
                             field of the wrong JSON shape (e.g. `"dynamodb": "x"`)
3. `unknown_table`           no table name, or no contract for it
4. `unknown_event_name`      eventName is not INSERT, MODIFY or REMOVE
5. `missing_event_time`      ApproximateCreationDateTime absent, not a number, out
                             of range, or with an unknown precision
6. `invalid_sequence_number` a sequence number with non-digits or more than 64 digits
                             (a record with none at all, as Kinesis Data Streams for
                             DynamoDB delivers them through Firehose, orders by event
                             time alone: its sequence number is all zeros)
7. `missing_new_image`       INSERT/MODIFY without NewImage
8. `missing_key:<attr>`      a key attribute absent or NULL (REMOVE: in Keys, else
                             OldImage); partition key first
9. per attribute, in contract order:
   `type_mismatch:<path>:<type>` the descriptor is not the declared type (B also
                                 when the text is not base64)
   `invalid_number:<path>`       an N (or NS element) that is not a DynamoDB number
   `<path>` is the attribute name, `.field` for M fields, `[]` for L items.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import reduce

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.contracts.model import (
    METADATA_COLUMNS,
    PIPELINE_COLUMNS,
    AttributeSpec,
    ContractError,
    TableContract,
    raw_schema,
    spark_type,
)

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")
QUARANTINE_COLUMNS = ("_source_table", "reason", "payload", "source_ref")
SEQUENCE_NUMBER_DIGITS = 64
TTL_PRINCIPAL = "dynamodb.amazonaws.com"

# DynamoDB number text: optional sign, digits with an optional fraction, optional exponent.
NUMBER_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# DynamoDB keeps at most 38 significant digits; more would be rounded somewhere downstream.
MAX_SIGNIFICANT_DIGITS = 38
# Checked with a length multiple of 4; a flat character class keeps Java's regex
# engine iterative on large binaries.
BASE64_PATTERN = r"^[A-Za-z0-9+/]*={0,2}$"

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
# Epoch values below 1e11 are seconds, below 1e14 milliseconds, below 1e17
# microseconds: each bound is the year 5138 in the smaller unit, far from real data.
SECONDS_BELOW = 10**11
MILLIS_BELOW = 10**14
MICROS_BELOW = 10**17

_CORRUPT = "_corrupt_record"
# The corrupt-record field of an image's typed schema; an attribute is unlikely to
# carry this name, and one that did would only send its rows down the slow path.
_IMAGE_MISFIT = "__image_does_not_fit"
_INVALID_UTF8 = "_invalid_utf8"
# The optional envelope column of landing files: a reason found while splitting the file.
SOURCE_ERROR = "source_error"
_DESCRIPTORS = T.MapType(T.StringType(), T.StringType())
# Descriptor texts inside an M value, and item texts of an L value.
_M_FIELDS = T.StructType([T.StructField("M", _DESCRIPTORS)])
_L_ITEMS = T.StructType([T.StructField("L", T.ArrayType(T.StringType()))])
# One kept field of `_extra_attributes`: its path and its descriptor's JSON text.
_EXTRA_ENTRY = T.StructType([T.StructField("path", T.StringType()), T.StructField("descriptor", T.StringType())])
# A field name without path characters (`.`, `[`, `]`, `"`) is written bare in an
# `_extra_attributes` path; any other is quoted.
_BARE_NAME = r'^[^.\[\]"]+$'
_IMAGES = ("Keys", "NewImage", "OldImage")
_RECORD = "_record"
# Metadata columns every table shares, straight from the parsed record.
_SHARED_METADATA = tuple(
    name for name in METADATA_COLUMNS if name not in PIPELINE_COLUMNS and name != "_extra_attributes"
)

PAYLOAD_SCHEMA = T.StructType(
    [
        T.StructField("eventID", T.StringType()),
        T.StructField("eventName", T.StringType()),
        T.StructField("eventSourceARN", T.StringType()),
        T.StructField("tableName", T.StringType()),
        T.StructField(
            "userIdentity",
            T.StructType([T.StructField("type", T.StringType()), T.StructField("principalId", T.StringType())]),
        ),
        T.StructField(
            "dynamodb",
            T.StructType(
                [
                    # Text, so a malformed value spoils only this field. Spark renders a
                    # fractional number through a double; near 1.7e9 s doubles are 0.24 µs
                    # apart, so rounding to whole microseconds still gives the exact value.
                    T.StructField("ApproximateCreationDateTime", T.StringType()),
                    T.StructField("ApproximateCreationDateTimePrecision", T.StringType()),
                    T.StructField("SequenceNumber", T.StringType()),
                    # Kept as JSON text: which schema an image is read with depends on
                    # its table, known only once this parse is done.
                    *[T.StructField(image, T.StringType()) for image in _IMAGES],
                ]
            ),
        ),
        T.StructField(_CORRUPT, T.StringType()),
    ]
)


def decode_batch(envelope: DataFrame, contracts: Mapping[str, TableContract]) -> tuple[dict[str, DataFrame], DataFrame]:
    """Decode a micro-batch of change envelopes: `split_records` of `decode_records`.

    The decoded frame is only fenced here, so that the filters on `reason` are not
    pushed into the parsing (which would run `from_json` again for every reference).
    A caller computing several outputs per batch persists `decode_records` itself
    instead, so each record is parsed and decoded once.
    """
    return split_records(_evaluate_once(decode_records(envelope, contracts)), contracts)


def split_records(
    decoded: DataFrame, contracts: Mapping[str, TableContract]
) -> tuple[dict[str, DataFrame], DataFrame]:
    """The decoded rows per DynamoDB table name (every contract has an entry, with the
    raw schema minus `_ingested_at`/`_batch_id`) and the quarantine rows
    (`_source_table`, `reason`, `payload`, `source_ref`) of a `decode_records` frame.
    Every record lands in exactly one of them.
    """
    tables = {
        table: valid_rows(decoded, contract, _table_column(index))
        for index, (table, contract) in enumerate(contracts.items())
    }
    return tables, invalid_rows(decoded)


def decode_records(envelope: DataFrame, contracts: Mapping[str, TableContract]) -> DataFrame:
    """One row per envelope row: `_source_table`, `reason` (null when the record is
    valid), `payload` and `source_ref` (only when it is not), and for the i-th
    contract a struct column `_table_column(i)` with the record's raw columns (null
    unless the record belongs to that table). The partition column is added later,
    per table, by `valid_rows`.
    """
    for contract in contracts.values():
        _check_partition_scope(envelope.sparkSession, contract)
    parsed = parse_records(envelope, contracts.keys())
    tables = list(contracts.values())
    owned = [_belongs_to(contract) for contract in tables]
    # Three projections, each reading the previous one's columns: referenced twice in
    # one projection, a parse would run twice.
    is_deleted = F.col("_is_deleted")
    typed = parsed.select(
        "*",
        *[
            F.when(own, F.from_json("_image", _image_schema(contract), {"columnNameOfCorruptRecord": _IMAGE_MISFIT}))
            .alias(_typed_column(index))
            for index, (contract, own) in enumerate(zip(tables, owned))
        ],
        *[
            F.when(own & ~is_deleted, F.from_json("_image", _outline_schema(contract))).alias(_outline_column(index))
            for index, (contract, own) in enumerate(zip(tables, owned))
            if _containers(contract)
        ],
    )
    keys = [set(contract.key_attributes) for contract in tables]
    descriptors = typed.select(
        "_source_table",
        "_record_error",
        "payload",
        "source_ref",
        *_SHARED_METADATA,
        *[
            _descriptor(F.col(_typed_column(index)), spec, own if spec.name in keys[index] else own & ~is_deleted)
            .alias(_descriptor_column(index, position))
            for index, (contract, own) in enumerate(zip(tables, owned))
            for position, spec in enumerate(contract.attributes)
        ],
        *[
            _extra_attributes(contract, index, own & ~is_deleted).alias(_extras_column(index))
            for index, (contract, own) in enumerate(zip(tables, owned))
        ],
    )
    reason = F.coalesce(
        F.col("_record_error"),
        *[F.when(own, _table_reason(contract, index)) for index, (contract, own) in enumerate(zip(tables, owned))],
    )
    return descriptors.select(
        "_source_table",
        reason.alias("reason"),
        # Only the quarantine needs the payload; valid rows do not carry it further.
        F.when(reason.isNotNull(), F.col("payload")).alias("payload"),
        F.when(reason.isNotNull(), F.col("source_ref")).alias("source_ref"),
        *[
            F.when(own, _table_row(contract, index)).alias(_table_column(index))
            for index, (contract, own) in enumerate(zip(tables, owned))
        ],
    )


def parse_records(envelope: DataFrame, table_names: Collection[str]) -> DataFrame:
    """Parse each payload once into the table-independent metadata of the change.

    `_record_error` holds the first record-level quarantine reason (null when the
    record can be routed to its table); `_image` is the JSON text of the image the
    item's attribute values are read from (NewImage, or the key attributes for a
    REMOVE).
    """
    # Spark's text source passes bytes through unchecked. Invalid UTF-8 that reached
    # raw would make its Parquet unreadable (pyarrow, Athena), so such a payload is
    # replaced by its readable form (U+FFFD for each bad sequence) and quarantined.
    readable = F.decode(F.encode("payload", "UTF-8"), "UTF-8")
    source_error = F.col(SOURCE_ERROR) if SOURCE_ERROR in envelope.columns else F.lit(None).cast("string")
    with_record = envelope.select(
        readable.alias("payload"),
        F.coalesce(F.col("payload") != readable, F.lit(False)).alias(_INVALID_UTF8),
        source_error.alias(SOURCE_ERROR),
        "source_ref",
        "kinesis_sequence_number",
    ).select(
        "*",
        F.from_json("payload", PAYLOAD_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT}).alias(_RECORD),
    )
    record = F.col(_RECORD)
    stream = record["dynamodb"]
    # The values below are each read several times, partly inside CASE branches where
    # Spark does not share common subexpressions, so each gets a column of its own.
    # try_cast has no Column method in PySpark 3.5; with ANSI mode a plain cast would
    # fail the whole batch on one malformed time.
    event_time = F.expr(f"try_cast({_RECORD}.dynamodb.ApproximateCreationDateTime AS decimal(38,9))")
    with_time = with_record.select(
        "*",
        F.coalesce(
            record["tableName"],
            F.nullif(F.regexp_extract(record["eventSourceARN"], r":table/([^/]+)", 1), F.lit("")),
        ).alias("_source_table"),
        _padded_sequence_number(
            F.coalesce(stream["SequenceNumber"], F.col("kinesis_sequence_number"), F.lit("0"))
        ).alias("_sequence_number"),
        event_time.alias("_event_time"),
    )
    with_micros = with_time.select(
        "*", _event_micros(F.col("_event_time"), stream["ApproximateCreationDateTimePrecision"]).alias("_micros")
    )
    table = F.col("_source_table")
    sequence_number = F.col("_sequence_number")
    micros = F.col("_micros")
    event_name = record["eventName"]
    is_deleted = F.coalesce(event_name == "REMOVE", F.lit(False))
    identity = record["userIdentity"]
    is_ttl_delete = is_deleted & F.coalesce(
        (identity["type"] == "Service") & (identity["principalId"] == TTL_PRINCIPAL), F.lit(False)
    )
    # Spark writes an object read as text back out as JSON, so it starts with `{`; a
    # JSON string holding such text would pass too, and is then decoded as the image.
    images_are_objects = reduce(
        Column.__and__, [F.coalesce(stream[image].startswith("{"), F.lit(True)) for image in _IMAGES]
    )
    record_error = (
        F.when(F.col(SOURCE_ERROR).isNotNull(), F.col(SOURCE_ERROR))
        .when(F.col(_INVALID_UTF8), "invalid_utf8")
        .when(record.isNull() | record[_CORRUPT].isNotNull() | ~images_are_objects, "invalid_json")
        .when(~F.coalesce(table.isin(list(table_names)), F.lit(False)), "unknown_table")
        .when(~F.coalesce(event_name.isin(list(EVENT_NAMES)), F.lit(False)), "unknown_event_name")
        .when(micros.isNull(), "missing_event_time")
        .when(sequence_number.isNull(), "invalid_sequence_number")
        .when(~is_deleted & stream["NewImage"].isNull(), "missing_new_image")
    )
    parsed = with_micros.select(
        "payload",
        "source_ref",
        record_error.alias("_record_error"),
        table.alias("_source_table"),
        event_name.alias("_event_name"),
        is_deleted.alias("_is_deleted"),
        is_ttl_delete.alias("_is_ttl_delete"),
        F.timestamp_micros(micros).alias("_event_ts"),
        sequence_number.alias("_sequence_number"),
        F.concat(_utc_digits(micros), sequence_number).alias("_ordering_value"),
        record["eventID"].alias("_event_id"),
        F.when(is_deleted, F.coalesce(stream["Keys"], stream["OldImage"]))
        .otherwise(stream["NewImage"])
        .alias("_image"),
    )
    return parsed


def valid_rows(decoded: DataFrame, contract: TableContract, table_column: str) -> DataFrame:
    """The table's decoded rows without a reason, in the raw schema minus the pipeline columns."""
    rows = decoded.where((F.col("_source_table") == contract.table) & F.col("reason").isNull()).select(
        f"{table_column}.*"
    )
    partitioned = rows.select(
        "*", F.expr(contract.partition_expression).cast("string").alias(contract.partition_column)
    )
    fields = [field for field in raw_schema(contract) if field.name not in PIPELINE_COLUMNS]
    return partitioned.select(*[F.col(field.name).cast(field.dataType).alias(field.name) for field in fields])


def invalid_rows(decoded: DataFrame) -> DataFrame:
    return decoded.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def _belongs_to(contract: TableContract) -> Column:
    return (F.col("_source_table") == contract.table) & F.col("_record_error").isNull()


def _check_partition_scope(spark: SparkSession, contract: TableContract) -> None:
    """The partition expression must resolve with only the key columns in scope: a
    tombstone carries nothing else, so reading another column would scatter
    tombstones across partitions. Analysis only; no job runs."""
    key_specs = [contract.attribute(name) for name in contract.key_attributes]
    keys_only = spark.range(0).select(*[F.lit(None).cast(spark_type(spec)).alias(spec.column) for spec in key_specs])
    try:
        keys_only.select(F.expr(contract.partition_expression))
    except AnalysisException as exc:
        raise ContractError(
            f"contract {contract.table!r}: partitioning.expression {contract.partition_expression!r} "
            f"may use only the key columns {list(contract.key_columns)}: {exc}"
        ) from exc


def _table_reason(contract: TableContract, index: int) -> Column:
    """The first attribute-level problem of a record of this table, or null."""
    position = {spec.name: number for number, spec in enumerate(contract.attributes)}
    missing_keys = [
        F.when(
            _is_missing(F.col(_descriptor_column(index, position[name])), contract.attribute(name)),
            f"missing_key:{name}",
        )
        for name in contract.key_attributes
    ]
    attribute_errors = [
        _attribute_error(F.col(_descriptor_column(index, number)), spec, spec.name)
        for number, spec in enumerate(contract.attributes)
    ]
    return F.coalesce(*missing_keys, *attribute_errors)


def _table_row(contract: TableContract, index: int) -> Column:
    """The raw columns of one record of this table, but the partition column."""
    return F.struct(
        *[
            _attribute_value(F.col(_descriptor_column(index, number)), spec).alias(spec.column)
            for number, spec in enumerate(contract.attributes)
        ],
        *_SHARED_METADATA,
        F.col(_extras_column(index)).alias("_extra_attributes"),
    )


def _evaluate_once(df: DataFrame) -> DataFrame:
    """Keep later filters (on `reason`, `_source_table`) from being pushed into `df`.

    Pushing a filter through a projection inlines the projected expressions, so each
    reference to a parsed column would run its `from_json` again, per row. The
    optimizer does not push a filter on a generator's output below the generator.
    """
    return df.select(F.inline(F.array(F.struct(*df.columns))))


def _event_micros(value: Column, precision: Column) -> Column:
    """Epoch microseconds of ApproximateCreationDateTime (s, ms or µs), or null.

    Kinesis records may state their precision; DynamoDB Streams records are in
    (possibly fractional) seconds. Without a stated precision the magnitude decides.
    Out-of-range values are dropped before any arithmetic, which could overflow.
    """
    micros_per_unit = (
        F.when((value <= 0) | (value >= MICROS_BELOW), F.lit(None))
        .when(precision == "MICROSECOND", F.lit(1))
        .when(precision == "MILLISECOND", F.lit(1_000))
        .when(precision.isNotNull(), F.lit(None))
        .when(value < SECONDS_BELOW, F.lit(MICROS_PER_SECOND))
        .when(value < MILLIS_BELOW, F.lit(1_000))
        .when(value < MICROS_BELOW, F.lit(1))
    )
    micros = F.round(value * micros_per_unit)
    return F.when(micros < MICROS_BELOW, micros.cast("bigint"))


def _padded_sequence_number(sequence_number: Column) -> Column:
    """Digits left-padded to a fixed width so that text order is numeric order."""
    fits = sequence_number.rlike(f"^[0-9]{{1,{SEQUENCE_NUMBER_DIGITS}}}$")
    return F.when(fits, F.lpad(sequence_number, SEQUENCE_NUMBER_DIGITS, "0"))


def _utc_digits(micros: Column) -> Column:
    """`yyyyMMddHHmmssSSSSSS` of epoch microseconds, always in UTC.

    Computed arithmetically because `date_format` follows the session time zone,
    where a daylight-saving fall-back would make the text go backwards. The time of
    day is built as one number (`HHmmssSSSSSS` < 2.4e11) and padded once.
    """
    micros_of_day = F.pmod(micros, F.lit(MICROS_PER_DAY))
    day = F.date_from_unix_date(((micros - micros_of_day) / MICROS_PER_DAY).cast("int"))
    hours = F.floor(micros_of_day / (3_600 * MICROS_PER_SECOND))
    minutes = F.floor(F.pmod(micros_of_day, F.lit(3_600 * MICROS_PER_SECOND)) / (60 * MICROS_PER_SECOND))
    seconds_and_fraction = F.pmod(micros_of_day, F.lit(60 * MICROS_PER_SECOND))
    time_of_day = hours * 10**10 + minutes * 10**8 + seconds_and_fraction
    return F.concat(F.date_format(day, "yyyyMMdd"), F.lpad(time_of_day.cast("string"), 12, "0"))


def _table_column(table_index: int) -> str:
    return f"__table_{table_index}"


def _typed_column(table_index: int) -> str:
    return f"__typed_image_{table_index}"


def _descriptor_column(table_index: int, attribute_index: int) -> str:
    return f"__descriptor_{table_index}_{attribute_index}"


def _extras_column(table_index: int) -> str:
    return f"__extra_attributes_{table_index}"


def _outline_column(table_index: int) -> str:
    return f"__image_outline_{table_index}"


def _image_schema(contract: TableContract) -> T.StructType:
    """from_json schema of a whole image of this table: one descriptor per attribute."""
    return T.StructType(
        [T.StructField(spec.name, _descriptor_schema(spec)) for spec in contract.attributes]
        + [T.StructField(_IMAGE_MISFIT, T.StringType())]
    )


def _descriptor(typed_image: Column, spec: AttributeSpec, read: Column) -> Column:
    """The attribute's descriptor parsed for its declared type; null unless `read`
    (a tombstone carries only its key: OldImage values would be stale).

    Taken from the typed image when the whole image fitted its schema. Otherwise
    this attribute's descriptor is parsed alone, so that one misfit cannot hide
    the others and the first one in contract order is the one reported.
    """
    alone = F.from_json(F.from_json("_image", _DESCRIPTORS)[spec.name], _descriptor_schema(spec))
    return F.when(read, F.when(typed_image[_IMAGE_MISFIT].isNull(), typed_image[spec.name]).otherwise(alone))


def _descriptor_schema(spec: AttributeSpec) -> T.StructType:
    """from_json schema of one descriptor: the declared type's key plus `NULL`."""
    return T.StructType(
        [T.StructField(spec.type, _descriptor_value_type(spec)), T.StructField("NULL", T.BooleanType())]
    )


def _descriptor_value_type(spec: AttributeSpec) -> T.DataType:
    if spec.type == "BOOL":
        return T.BooleanType()
    if spec.type in ("SS", "NS", "BS"):
        return T.ArrayType(T.StringType())
    if spec.type == "L":
        assert spec.items is not None  # guaranteed by contract validation
        return T.ArrayType(_descriptor_schema(spec.items))
    if spec.type == "M":
        return T.StructType([T.StructField(field.name, _descriptor_schema(field)) for field in spec.fields])
    return T.StringType()  # S, N and B (base64 text)


def _is_missing(descriptor: Column, spec: AttributeSpec) -> Column:
    """Absent, or `{"NULL": true}`."""
    return descriptor.isNull() | (descriptor[spec.type].isNull() & F.coalesce(descriptor["NULL"], F.lit(False)))


def _attribute_value(descriptor: Column, spec: AttributeSpec) -> Column:
    value = descriptor[spec.type]
    # unbase64 throws on malformed text, and values are computed for rows that the
    # quarantine will take, so only well-formed text is decoded.
    if spec.type == "B":
        return F.when(_is_base64(value), F.unbase64(value))
    if spec.type == "BS":
        return F.transform(value, lambda text: F.when(_is_base64(text), F.unbase64(text)))
    if spec.type == "L":
        assert spec.items is not None
        item_spec = spec.items
        return F.transform(value, lambda item: _attribute_value(item, item_spec))
    if spec.type == "M":
        return F.when(
            value.isNotNull(),
            F.struct(*[_attribute_value(value[field.name], field).alias(field.column) for field in spec.fields]),
        )
    return value


def _attribute_error(descriptor: Column, spec: AttributeSpec, path: str) -> Column:
    """The first problem of one descriptor as a quarantine reason, or null."""
    value = descriptor[spec.type]
    mismatch = descriptor.isNotNull() & value.isNull() & ~F.coalesce(descriptor["NULL"], F.lit(False))
    return F.when(mismatch, f"type_mismatch:{path}:{spec.type}").otherwise(_content_error(value, spec, path))


def _content_error(value: Column, spec: AttributeSpec, path: str) -> Column:
    if spec.type == "N":
        return F.when(~_is_number(value), f"invalid_number:{path}")
    if spec.type == "NS":
        return F.when(
            F.exists(value, lambda number: ~F.coalesce(_is_number(number), F.lit(False))), f"invalid_number:{path}"
        )
    if spec.type == "B":
        return F.when(~_is_base64(value), f"type_mismatch:{path}:B")
    if spec.type == "BS":
        return F.when(
            F.exists(value, lambda text: ~F.coalesce(_is_base64(text), F.lit(False))), f"type_mismatch:{path}:BS"
        )
    if spec.type == "L":
        assert spec.items is not None
        item_spec = spec.items
        item_errors = F.transform(value, lambda item: _attribute_error(item, item_spec, f"{path}[]"))
        return F.get(F.filter(item_errors, lambda error: error.isNotNull()), 0)
    if spec.type == "M":
        return F.coalesce(
            *[_attribute_error(value[field.name], field, f"{path}.{field.name}") for field in spec.fields]
        )
    return F.lit(None).cast("string")


def _is_number(text: Column) -> Column:
    mantissa = F.regexp_replace(text, "[eE].*$", "")
    significant = F.regexp_replace(F.regexp_replace(mantissa, "[^0-9]", ""), "^0+|0+$", "")
    # Text this short cannot hold too many digits; counting them is most of the cost.
    few_digits = F.length(text) <= MAX_SIGNIFICANT_DIGITS
    return text.rlike(NUMBER_PATTERN) & (few_digits | (F.length(significant) <= MAX_SIGNIFICANT_DIGITS))


def _is_base64(text: Column) -> Column:
    return text.rlike(BASE64_PATTERN) & (F.length(text) % 4 == 0)


def _extra_attributes(contract: TableContract, index: int, read: Column) -> Column:
    """A JSON object of the image's fields the contract does not name, at any depth:
    path -> DynamoDB JSON descriptor, members sorted by path; null when there are none.

    Every read row lists its top-level keys and, for a contract that declares M
    values, reads their outline (one more parse of the image); only a record where
    these show an undeclared field pays for building the object.
    """
    names = F.array(*[F.lit(spec.name) for spec in contract.attributes])
    containers = _containers(contract)
    checks = [F.size(F.array_except(F.json_object_keys("_image"), names)) > 0]
    if containers:
        typed_image, outline = F.col(_typed_column(index)), F.col(_outline_column(index))
        # An image that did not fit its typed schema is decoded attribute by attribute
        # elsewhere; its typed values cannot be trusted here, so its object is built.
        checks.append(typed_image[_IMAGE_MISFIT].isNotNull())
        checks += [_holds_undeclared(typed_image[spec.name], outline[spec.name], spec) for spec in containers]
    has_undeclared = reduce(Column.__or__, [F.coalesce(check, F.lit(False)) for check in checks])

    def undeclared_entries(attributes: Column) -> Column:
        return F.concat(
            _path_entries(F.map_filter(attributes, lambda name, _: ~F.array_contains(names, name)), None),
            *[
                _undeclared_entries(attributes[spec.name], spec, _child_path(None, F.lit(spec.name)))
                for spec in containers
            ],
        )

    entries = _bind(F.from_json("_image", _DESCRIPTORS), undeclared_entries)
    members = F.transform(
        F.array_sort(entries),
        lambda entry: F.concat(
            _json_string(entry["path"]), F.lit(":"), F.coalesce(entry["descriptor"], F.lit("null"))
        ),
    )
    as_object = F.nullif(F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}")), F.lit("{}"))
    return F.when(read & has_undeclared, as_object)


def _containers(contract: TableContract) -> list[AttributeSpec]:
    """The contract's attributes that can hold fields of their own."""
    return [spec for spec in contract.attributes if _may_hold_fields(spec)]


def _may_hold_fields(spec: AttributeSpec) -> bool:
    """Whether a declared value can contain named fields: an M, or an L of them."""
    if spec.type == "M":
        return True
    if spec.type == "L":
        assert spec.items is not None
        return _may_hold_fields(spec.items)
    return False


def _outline_schema(contract: TableContract) -> T.StructType:
    """from_json schema of the outline of an image's declared M values (also inside
    L items): the field names in each, down to the deepest declared one.

    Fields below that depth are read as text and the other attributes are skipped,
    so this parse costs about half the typed one (measured on generated orders); it
    is what tells a record with undeclared nested fields from one without.
    """
    return T.StructType(
        [T.StructField(spec.name, _descriptor_outline(_outline_depth(spec))) for spec in _containers(contract)]
    )


def _outline_depth(spec: AttributeSpec) -> int:
    """Descriptor levels of this value the outline must open: one per M or L on the
    way down to its deepest declared M."""
    if not _may_hold_fields(spec):
        return 0
    if spec.type == "L":
        assert spec.items is not None
        return 1 + _outline_depth(spec.items)
    return 1 + max((_outline_depth(field) for field in spec.fields), default=0)


def _descriptor_outline(depth: int) -> T.DataType:
    """The outline of a descriptor opened `depth` levels deep: the fields of its M and
    the items of its L; at depth 0 the descriptor's JSON text."""
    if depth == 0:
        return T.StringType()
    inner = _descriptor_outline(depth - 1)
    return T.StructType(
        [T.StructField("M", T.MapType(T.StringType(), inner)), T.StructField("L", T.ArrayType(inner))]
    )


def _holds_undeclared(descriptor: Column | None, outline: Column, spec: AttributeSpec) -> Column:
    """Whether a declared M value (or an L of them) holds a field its spec does not
    declare, at any depth. `outline` is the value's outline, `descriptor` its typed
    value, needed only where the outline can lose a map (see below).

    Where an M has declared M or L fields, the outline reads every field of it as an
    outline too, and Spark drops the whole map when one of them is not a JSON object
    (e.g. an undeclared `"legacy": 5`). Where the typed value is there but its
    outline is not, the answer is yes, and building the object decides exactly.
    Fields read as text cannot be dropped, so most values need no typed twin.
    """
    checks: list[Column] = []
    if spec.type == "M":
        outline_fields = outline["M"]
        declared = F.array(*[F.lit(field.name) for field in spec.fields])
        checks.append(F.size(F.array_except(F.map_keys(outline_fields), declared)) > 0)
        holders = [field for field in spec.fields if _may_hold_fields(field)]
        if holders:
            assert descriptor is not None
            typed_fields = descriptor["M"]
            checks.append(typed_fields.isNotNull() & outline_fields.isNull())
            checks += [
                _holds_undeclared(typed_fields[field.name], outline_fields[field.name], field) for field in holders
            ]
    else:
        assert spec.type == "L" and spec.items is not None
        item_spec = spec.items
        outline_items = outline["L"]
        typed_items = descriptor["L"] if descriptor is not None else None
        if typed_items is not None:
            checks.append(typed_items.isNotNull() & outline_items.isNull())
        if typed_items is not None and _outline_may_drop(item_spec):
            item_checks = F.transform(
                outline_items,
                lambda item, position: _holds_undeclared(F.get(typed_items, position), item, item_spec),
            )
            checks.append(F.exists(item_checks, lambda holds: holds))
        else:
            # Higher-order functions run interpreted, so items skip the typed lookup
            # they do not need.
            checks.append(F.exists(outline_items, lambda item: _holds_undeclared(None, item, item_spec)))
    return reduce(Column.__or__, [F.coalesce(check, F.lit(False)) for check in checks])


def _outline_may_drop(spec: AttributeSpec) -> bool:
    """Whether Spark may drop part of this value's outline: some M in it has declared
    M or L fields, whose outlines are structs rather than text."""
    if spec.type == "M":
        return any(_may_hold_fields(field) for field in spec.fields)
    if spec.type == "L":
        assert spec.items is not None
        return _outline_may_drop(spec.items)
    return False


def _undeclared_entries(descriptor_text: Column, spec: AttributeSpec, path: Column) -> Column:
    """`(path, descriptor)` of every field inside a declared M value (or an L of them)
    that its spec does not declare, at any depth; an empty array when there is none
    (also for `{"NULL": true}`, which holds nothing)."""
    if spec.type == "M":
        declared = F.array(*[F.lit(field.name) for field in spec.fields])

        def undeclared(fields: Column) -> Column:
            return F.concat(
                _path_entries(F.map_filter(fields, lambda name, _: ~F.array_contains(declared, name)), path),
                *[
                    _undeclared_entries(fields[field.name], field, _child_path(path, F.lit(field.name)))
                    for field in spec.fields
                    if _may_hold_fields(field)
                ],
            )

        entries = _bind(F.from_json(descriptor_text, _M_FIELDS)["M"], undeclared)
    else:
        assert spec.type == "L" and spec.items is not None
        item_spec = spec.items
        entries = F.flatten(
            F.transform(
                F.from_json(descriptor_text, _L_ITEMS)["L"],
                lambda item, position: _undeclared_entries(
                    item, item_spec, F.concat(path, F.lit("["), position.cast("string"), F.lit("]"))
                ),
            )
        )
    return F.coalesce(entries, _no_entries())


def _path_entries(descriptors: Column, parent: Column | None) -> Column:
    """`(path, descriptor)` of each entry of a name -> descriptor text map."""
    return F.transform(
        F.map_entries(descriptors),
        lambda entry: F.struct(
            _child_path(parent, entry["key"]).alias("path"), entry["value"].alias("descriptor")
        ),
    )


def _child_path(parent: Column | None, name: Column) -> Column:
    """The path of field `name` inside `parent` (None: a top-level attribute).

    A name holding none of `.`, `[`, `]`, `"` is written as is (`.name` below the
    top); any other as a JSON string in brackets (`["a.b"]`), so no two fields of an
    image share a path.
    """
    quoted = F.concat(F.lit("["), _json_string(name), F.lit("]"))
    bare = name if parent is None else F.concat(F.lit("."), name)
    segment = F.when(name.rlike(_BARE_NAME), bare).otherwise(quoted)
    return segment if parent is None else F.concat(parent, segment)


def _no_entries() -> Column:
    return F.array().cast(T.ArrayType(_EXTRA_ENTRY))


def _bind(value: Column, body: Callable[[Column], Column]) -> Column:
    """`body(value)` with `value` computed once, however often `body` reads it.

    Spark does not share common subexpressions inside CASE branches, so a parse that
    `body` read twice would run twice; a lambda variable is evaluated once.
    """
    return F.get(F.transform(F.array(value), body), 0)


def _json_string(text: Column) -> Column:
    """`text` as a quoted, escaped JSON string."""
    as_array = F.to_json(F.array(text))  # ["text"], with JSON escaping
    return as_array.substr(F.lit(2), F.length(as_array) - 2)
