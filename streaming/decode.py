"""Change envelope -> typed raw rows per table + quarantine rows (Spark expressions only).

The payload is parsed once with `from_json`; the item images are read as
`map<string,string>` so each attribute keeps its DynamoDB JSON descriptor as text
(`{"N":"12.50"}`), which is then parsed against the contract's type. Nothing is
inferred from the data, so an unexpected descriptor is reported, never guessed.

A record that cannot be decoded goes to quarantine with exactly one reason, the
first that applies in this order:

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
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.contract import PIPELINE_COLUMNS, AttributeSpec, ContractError, TableContract, raw_schema

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
_INVALID_UTF8 = "_invalid_utf8"
_IMAGE = T.MapType(T.StringType(), T.StringType())
_RECORD = "_record"
_REST = "__rest"

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
                    T.StructField("Keys", _IMAGE),
                    T.StructField("NewImage", _IMAGE),
                    T.StructField("OldImage", _IMAGE),
                ]
            ),
        ),
        T.StructField(_CORRUPT, T.StringType()),
    ]
)


def decode_batch(
    envelope: DataFrame,
    contracts: Mapping[str, TableContract],
    keep: Callable[[DataFrame], DataFrame] | None = None,
) -> tuple[dict[str, DataFrame], DataFrame]:
    """Decode a micro-batch of change envelopes.

    Returns the decoded rows per DynamoDB table name (every contract has an entry,
    with the raw schema minus `_ingested_at`/`_batch_id`) and the quarantine rows
    (`_source_table`, `reason`, `payload`, `source_ref`). Every input row lands in
    exactly one of them. The outputs are lazy and share the parsed records and each
    table's decoded rows. `keep` is applied to those shared frames: a caller computing
    several outputs passes persist, so the JSON is parsed and each table decoded once
    per batch. The default only fences them, so that the filters on `reason` are not
    pushed into the parsing (which would run `from_json` again for every reference).
    """
    keep = keep or _evaluate_once
    parsed = keep(parse_records(envelope, contracts.keys()))
    tables: dict[str, DataFrame] = {}
    quarantined = [unroutable_records(parsed)]
    for table, contract in contracts.items():
        decoded = keep(decode_table(parsed, contract))
        tables[table] = valid_rows(decoded, contract)
        quarantined.append(invalid_rows(decoded))
    return tables, reduce(DataFrame.unionByName, quarantined)


def parse_records(envelope: DataFrame, table_names: Collection[str]) -> DataFrame:
    """Parse each payload once into the table-independent metadata of the change.

    `_record_error` holds the first record-level quarantine reason (null when the
    record can be routed to its table); `_image` is the map the item's attribute
    values are read from (NewImage, or the key attributes for a REMOVE).
    """
    # Spark's text source passes bytes through unchecked. Invalid UTF-8 that reached
    # raw would make its Parquet unreadable (pyarrow, Athena), so such a payload is
    # replaced by its readable form (U+FFFD for each bad sequence) and quarantined.
    readable = F.decode(F.encode("payload", "UTF-8"), "UTF-8")
    with_record = envelope.select(
        readable.alias("payload"),
        F.coalesce(F.col("payload") != readable, F.lit(False)).alias(_INVALID_UTF8),
        "source_ref",
        "kinesis_sequence_number",
    ).select(
        "*",
        F.from_json("payload", PAYLOAD_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT}).alias(_RECORD),
    )
    record = F.col(_RECORD)
    stream = record["dynamodb"]
    table = F.coalesce(
        record["tableName"],
        F.nullif(F.regexp_extract(record["eventSourceARN"], r":table/([^/]+)", 1), F.lit("")),
    )
    event_name = record["eventName"]
    is_deleted = F.coalesce(event_name == "REMOVE", F.lit(False))
    # try_cast has no Column method in PySpark 3.5; with ANSI mode a plain cast would
    # fail the whole batch on one malformed time.
    event_time = F.expr(f"try_cast({_RECORD}.dynamodb.ApproximateCreationDateTime AS decimal(38,9))")
    micros = _event_micros(event_time, stream["ApproximateCreationDateTimePrecision"])
    sequence_number = _padded_sequence_number(
        F.coalesce(stream["SequenceNumber"], F.col("kinesis_sequence_number"), F.lit("0"))
    )
    identity = record["userIdentity"]
    is_ttl_delete = is_deleted & F.coalesce(
        (identity["type"] == "Service") & (identity["principalId"] == TTL_PRINCIPAL), F.lit(False)
    )
    record_error = (
        F.when(F.col(_INVALID_UTF8), "invalid_utf8")
        .when(record.isNull() | record[_CORRUPT].isNotNull(), "invalid_json")
        .when(~F.coalesce(table.isin(list(table_names)), F.lit(False)), "unknown_table")
        .when(~F.coalesce(event_name.isin(list(EVENT_NAMES)), F.lit(False)), "unknown_event_name")
        .when(micros.isNull(), "missing_event_time")
        .when(sequence_number.isNull(), "invalid_sequence_number")
        .when(~is_deleted & stream["NewImage"].isNull(), "missing_new_image")
    )
    parsed = with_record.select(
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


def unroutable_records(parsed: DataFrame) -> DataFrame:
    """Quarantine rows for records that fail before any table contract applies."""
    return parsed.where(F.col("_record_error").isNotNull()).select(
        "_source_table", F.col("_record_error").alias("reason"), "payload", "source_ref"
    )


def decode_table(parsed: DataFrame, contract: TableContract) -> DataFrame:
    """Decode the records of one table: raw columns plus `reason` (null when valid),
    `payload` and `source_ref` (kept for the quarantine).
    """
    own = parsed.where((F.col("_source_table") == contract.table) & F.col("_record_error").isNull())
    keys = set(contract.key_attributes)
    image = F.col("_image")
    is_deleted = F.col("_is_deleted")
    descriptors = own.select(
        "*",
        *[
            _parse_descriptor(image, spec, read=F.lit(True) if spec.name in keys else ~is_deleted).alias(
                _descriptor_column(index)
            )
            for index, spec in enumerate(contract.attributes)
        ],
        _extra_attributes(image, [spec.name for spec in contract.attributes], is_deleted).alias(
            "_extra_attributes"
        ),
    )
    specs = list(enumerate(contract.attributes))
    position = {spec.name: index for index, spec in specs}
    missing_keys = [
        F.when(_is_missing(F.col(_descriptor_column(position[name])), contract.attribute(name)), f"missing_key:{name}")
        for name in contract.key_attributes
    ]
    attribute_errors = [_attribute_error(F.col(_descriptor_column(index)), spec, spec.name) for index, spec in specs]
    reason = F.coalesce(*missing_keys, *attribute_errors)
    metadata = [field.name for field in raw_schema(contract) if field.name.startswith("_")]
    values = {spec.column: _attribute_value(F.col(_descriptor_column(index)), spec) for index, spec in specs}
    rest = F.struct(
        *[values[column].alias(column) for column in contract.business_columns if column not in contract.key_columns],
        *[column for column in metadata if column not in PIPELINE_COLUMNS],
        reason.alias("reason"),
        "payload",
        "source_ref",
    )
    typed = descriptors.select(*[values[column].alias(column) for column in contract.key_columns], rest.alias(_REST))
    # Only the key columns are in scope here, so an expression that reads any other
    # column fails at once instead of scattering tombstones across partitions.
    try:
        partitioned = typed.select(
            "*", F.expr(contract.partition_expression).cast("string").alias(contract.partition_column)
        )
    except AnalysisException as exc:
        raise ContractError(
            f"contract {contract.table!r}: partitioning.expression {contract.partition_expression!r} "
            f"may use only the key columns {list(contract.key_columns)}: {exc}"
        ) from exc
    return partitioned.select(*contract.key_columns, contract.partition_column, f"{_REST}.*")


def valid_rows(decoded: DataFrame, contract: TableContract) -> DataFrame:
    """The decoded rows without a reason, in the raw schema minus the pipeline columns."""
    fields = [field for field in raw_schema(contract) if field.name not in PIPELINE_COLUMNS]
    return decoded.where(F.col("reason").isNull()).select(
        *[F.col(field.name).cast(field.dataType).alias(field.name) for field in fields]
    )


def invalid_rows(decoded: DataFrame) -> DataFrame:
    return decoded.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def _evaluate_once(df: DataFrame) -> DataFrame:
    """Keep later filters (on `reason`, `_record_error`) from being pushed into `df`.

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
    where a daylight-saving fall-back would make the text go backwards.
    """
    micros_of_day = F.pmod(micros, F.lit(MICROS_PER_DAY))
    day = F.date_from_unix_date(((micros - micros_of_day) / MICROS_PER_DAY).cast("int"))
    hours = F.floor(micros_of_day / (3_600 * MICROS_PER_SECOND))
    minutes = F.floor(F.pmod(micros_of_day, F.lit(3_600 * MICROS_PER_SECOND)) / (60 * MICROS_PER_SECOND))
    seconds = F.floor(F.pmod(micros_of_day, F.lit(60 * MICROS_PER_SECOND)) / MICROS_PER_SECOND)
    fraction = F.pmod(micros_of_day, F.lit(MICROS_PER_SECOND))
    return F.concat(
        F.date_format(day, "yyyyMMdd"), F.format_string("%02d%02d%02d%06d", hours, minutes, seconds, fraction)
    )


def _descriptor_column(index: int) -> str:
    return f"__descriptor_{index}"


def _parse_descriptor(image: Column, spec: AttributeSpec, read: Column) -> Column:
    """The attribute's descriptor parsed for its declared type; null unless `read`
    (a tombstone carries only its key: OldImage values would be stale)."""
    return F.when(read, F.from_json(image[spec.name], _descriptor_schema(spec)))


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
    return text.rlike(NUMBER_PATTERN) & (F.length(significant) <= MAX_SIGNIFICANT_DIGITS)


def _is_base64(text: Column) -> Column:
    return text.rlike(BASE64_PATTERN) & (F.length(text) % 4 == 0)


def _extra_attributes(image: Column, named: list[str], is_deleted: Column) -> Column:
    """A JSON object (DynamoDB JSON) of the image's attributes the contract does not name."""
    names = F.array(*[F.lit(name) for name in named])
    extras = F.map_filter(image, lambda name, _: ~F.array_contains(names, name))
    members = F.transform(
        F.array_sort(F.map_entries(extras)),
        lambda entry: F.concat(_json_string(entry["key"]), F.lit(":"), F.coalesce(entry["value"], F.lit("null"))),
    )
    return F.when(~is_deleted & (F.size(extras) > 0), F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}")))


def _json_string(text: Column) -> Column:
    """`text` as a quoted, escaped JSON string."""
    as_array = F.to_json(F.array(text))  # ["text"], with JSON escaping
    return as_array.substr(F.lit(2), F.length(as_array) - 2)
