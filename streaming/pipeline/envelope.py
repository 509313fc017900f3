"""The change envelope, which every source produces, and stage 1 of decoding: each change
record's envelope, parsed once.

The envelope is defined here alone (ENVELOPE_SCHEMA): the sources (streaming.io.sources)
build it with `envelope_columns`, replays and tests build it from rows with the schema.

What every table shares is read here: the table the record belongs to, its event name,
the change time (in whichever precision the record states), the sequence number, the
TTL flag, and the image the item's values are read from, kept as JSON text for stage 2
(attributes.py), which reads it with its table's schema. The first record-level problem
becomes the record's reason (decode.py lists them in order).
"""
from __future__ import annotations

from collections.abc import Collection
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.pipeline import reasons

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")
SEQUENCE_NUMBER_DIGITS = 64
TTL_PRINCIPAL = "dynamodb.amazonaws.com"
TTL_IDENTITY_TYPE = "Service"
# DynamoDB Streams view types whose records hold no NewImage: an INSERT or MODIFY of such
# a stream carries the item's key at most, never its values. Kinesis Data Streams for
# DynamoDB records state no view type and carry both images.
UNUSABLE_VIEW_TYPES = ("KEYS_ONLY", "OLD_IMAGE")
MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
# Epoch values below 1e11 are seconds, below 1e14 milliseconds, below 1e17
# microseconds: each bound is the year 5138 in the smaller unit, far from real data.
SECONDS_BELOW = 10**11
MILLIS_BELOW = 10**14
MICROS_BELOW = 10**17

# docs/architecture.md, "The change envelope": one change record as JSON text, unparsed;
# the Kinesis sequence number when the source has one; where the record came from.
ENVELOPE_SCHEMA = T.StructType(
    [
        T.StructField("payload", T.StringType()),
        T.StructField("kinesis_sequence_number", T.StringType()),
        T.StructField("source_ref", T.StringType()),
    ]
)
ENVELOPE_COLUMNS = tuple(ENVELOPE_SCHEMA.fieldNames())
_CORRUPT = "_corrupt_record"
# Java regular expressions: the escape of any surrogate (U+D800 to U+DFFF), and an escaped
# backslash or the escapes of a high and a low surrogate, which together are one character.
_SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
_BACKSLASH_OR_PAIR_ESCAPE = r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_INVALID_UTF8 = "_invalid_utf8"
# The optional envelope column of landing files, after ENVELOPE_COLUMNS: a reason found
# while splitting the file (streaming/io/landing_reader.py), null for a well-formed record.
SOURCE_ERROR = "source_error"
IMAGES = ("Keys", "NewImage", "OldImage")
_RECORD = "_record"
# Projections applied one after another, each reading the previous one's columns.
Projections = tuple[tuple[Column, ...], ...]


def envelope_columns(
    payload: Column, source_ref: Column, kinesis_sequence_number: Column | None = None
) -> tuple[Column, ...]:
    """A source's columns as the envelope's, in ENVELOPE_SCHEMA's order and types; a source
    without Kinesis sequence numbers leaves that column null."""
    given = {
        "payload": payload,
        "kinesis_sequence_number": F.lit(None) if kinesis_sequence_number is None else kinesis_sequence_number,
        "source_ref": source_ref,
    }
    return tuple(given[field.name].cast(field.dataType).alias(field.name) for field in ENVELOPE_SCHEMA.fields)


def project(frame: DataFrame, projections: Projections) -> DataFrame:
    for columns in projections:
        frame = frame.select(*columns)
    return frame

PAYLOAD_SCHEMA = T.StructType(
    [
        T.StructField("eventID", T.StringType()),
        T.StructField("eventName", T.StringType()),
        T.StructField("eventSourceARN", T.StringType()),
        T.StructField("tableName", T.StringType()),
        # A map, not a struct: Spark matches JSON keys case-sensitively, and a struct holding
        # both spellings below cannot be read by name (its fields are ambiguous).
        T.StructField("userIdentity", T.MapType(T.StringType(), T.StringType())),
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
                    T.StructField("StreamViewType", T.StringType()),
                    # Kept as JSON text: which schema an image is read with depends on
                    # its table, known only once this parse is done.
                    *[T.StructField(image, T.StringType()) for image in IMAGES],
                ]
            ),
        ),
        T.StructField(_CORRUPT, T.StringType()),
    ]
)


def parse_projections(table_names: Collection[str], has_source_error: bool) -> Projections:
    """The projections that parse each payload once into the table-independent metadata
    of the change, applied in order to an envelope (with a `source_error` column when
    `has_source_error`). They hold no data, so the decoder builds them once and reuses
    them for every micro-batch.

    The last one's columns: `_record_error` holds the first record-level quarantine
    reason (null when the record can be routed to its table); `_image` is the JSON text
    of the image the item's attribute values are read from (NewImage, or the key
    attributes for a REMOVE); `_keys` and `_old_image` are the Keys' and the OldImage's;
    `_unusable_view_type` is the record's StreamViewType when it is one of
    `UNUSABLE_VIEW_TYPES` and the record belongs to one of `table_names`.
    """
    # Spark's text source passes bytes through unchecked. Invalid UTF-8 that reached
    # raw would make its Parquet unreadable (pyarrow, Athena), so such a payload is
    # replaced by its readable form (U+FFFD for each bad sequence) and quarantined.
    readable = F.decode(F.encode("payload", "UTF-8"), "UTF-8")
    source_error = F.col(SOURCE_ERROR) if has_source_error else F.lit(None).cast("string")
    envelope = (
        readable.alias("payload"),
        F.coalesce(F.col("payload") != readable, F.lit(False)).alias(_INVALID_UTF8),
        source_error.alias(SOURCE_ERROR),
        F.col("source_ref"),
        F.col("kinesis_sequence_number"),
    )
    with_record = (
        F.col("*"),
        F.from_json("payload", PAYLOAD_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT}).alias(_RECORD),
    )
    record = F.col(_RECORD)
    stream = record["dynamodb"]
    # The values below are each read several times, partly inside CASE branches where
    # Spark does not share common subexpressions, so each gets a column of its own.
    # try_cast has no Column method in PySpark 3.5; with ANSI mode a plain cast would
    # fail the whole batch on one malformed time.
    event_time = F.expr(f"try_cast({_RECORD}.dynamodb.ApproximateCreationDateTime AS decimal(38,9))")
    with_time = (
        F.col("*"),
        F.coalesce(
            record["tableName"],
            F.nullif(F.regexp_extract(record["eventSourceARN"], r":table/([^/]+)", 1), F.lit("")),
        ).alias("_source_table"),
        _padded_sequence_number(
            F.coalesce(stream["SequenceNumber"], F.col("kinesis_sequence_number"), F.lit("0"))
        ).alias("_sequence_number"),
        event_time.alias("_event_time"),
    )
    with_micros = (
        F.col("*"),
        _event_micros(F.col("_event_time"), stream["ApproximateCreationDateTimePrecision"]).alias("_micros"),
    )
    table = F.col("_source_table")
    sequence_number = F.col("_sequence_number")
    micros = F.col("_micros")
    event_name = record["eventName"]
    is_deleted = F.coalesce(event_name == "REMOVE", F.lit(False))
    # Lambda and Kinesis Data Streams for DynamoDB spell the identity's fields `type` and
    # `principalId`; the DynamoDB Streams GetRecords API spells them `Type` and `PrincipalId`.
    identity = record["userIdentity"]
    identity_type = F.coalesce(identity["type"], identity["Type"])
    principal = F.coalesce(identity["principalId"], identity["PrincipalId"])
    is_ttl_delete = is_deleted & F.coalesce(
        (identity_type == TTL_IDENTITY_TYPE) & (principal == TTL_PRINCIPAL), F.lit(False)
    )
    known_table = F.coalesce(table.isin(sorted(table_names)), F.lit(False))
    # Spark writes an object read as text back out as JSON, so it starts with `{`; a
    # JSON string holding such text would pass too, and is then decoded as the image.
    images_are_objects = reduce(
        Column.__and__, [F.coalesce(stream[image].startswith("{"), F.lit(True)) for image in IMAGES]
    )
    record_error = (
        F.when(F.col(SOURCE_ERROR).isNotNull(), F.col(SOURCE_ERROR))
        .when(F.col(_INVALID_UTF8), reasons.INVALID_UTF8)
        .when(record.isNull() | record[_CORRUPT].isNotNull() | ~images_are_objects, reasons.INVALID_JSON)
        .when(_has_lone_surrogate(F.col("payload")), reasons.LONE_SURROGATE)
        .when(table.isNull(), reasons.NO_TABLE_NAME)
        .when(~known_table, reasons.UNKNOWN_TABLE)
        .when(~F.coalesce(event_name.isin(list(EVENT_NAMES)), F.lit(False)), reasons.UNKNOWN_EVENT_NAME)
        .when(micros.isNull(), reasons.MISSING_EVENT_TIME)
        .when(sequence_number.isNull(), reasons.INVALID_SEQUENCE_NUMBER)
        .when(~is_deleted & stream["NewImage"].isNull(), reasons.MISSING_NEW_IMAGE)
    )
    parsed = (
        F.col("payload"),
        F.col("source_ref"),
        record_error.alias("_record_error"),
        table.alias("_source_table"),
        event_name.alias("_event_name"),
        is_deleted.alias("_is_deleted"),
        is_ttl_delete.alias("_is_ttl_delete"),
        F.timestamp_micros(micros).alias("_event_ts"),
        sequence_number.alias("_sequence_number"),
        F.concat(_utc_digits(micros), sequence_number, _tie_breaker(record["eventID"], F.col("payload"))).alias(
            "_ordering_value"
        ),
        record["eventID"].alias("_event_id"),
        F.when(is_deleted, F.coalesce(stream["Keys"], stream["OldImage"]))
        .otherwise(stream["NewImage"])
        .alias("_image"),
        # Read only to route the items of single-table designs (streaming.pipeline.routing).
        stream["Keys"].alias("_keys"),
        stream["OldImage"].alias("_old_image"),
        F.when(known_table & stream["StreamViewType"].isin(list(UNUSABLE_VIEW_TYPES)), stream["StreamViewType"])
        .alias("_unusable_view_type"),
    )
    return (envelope, with_record, with_time, with_micros, parsed)


def _has_lone_surrogate(payload: Column) -> Column:
    """Whether the JSON text holds a `\\u` escape of a UTF-16 surrogate without its pair.

    JSON allows such an escape, and Spark's reader keeps it in the string, but no UTF-8
    text can hold it: Parquet would get `?` in its place, altering the value silently.
    Escaped backslashes and surrogate pairs are removed first, left to right as a JSON
    reader meets them, so `\\\\ud800` (a backslash, then text) and `\\ud83d\\ude00` (one
    character) pass, and any surrogate escape left is a lone one. A plain substring test
    first keeps the regular expressions off records without `\\ud`, nearly all of them.
    """
    might_hold_one = payload.contains("\\ud") | payload.contains("\\uD")
    return might_hold_one & F.regexp_replace(payload, _BACKSLASH_OR_PAIR_ESCAPE, "").rlike(_SURROGATE_ESCAPE)


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


def _tie_breaker(event_id: Column, payload: Column) -> Column:
    """The end of `_ordering_value` that makes it differ between any two distinct changes.

    Records without a sequence number (Kinesis Data Streams for DynamoDB) tie on time
    when two writes to an item share a microsecond (a millisecond, at the default
    precision). Hudi compares one field and lets the incoming row win a tie, so the tie
    is broken inside the value itself, and every reader (Spark, Hudi, DuckDB, Athena)
    then needs only "greatest `_ordering_value` wins". The eventID goes in as the hex
    of its UTF-8 bytes: hex text sorts exactly as the bytes do, whichever string
    comparison a reader uses (UTF-8 bytes or UTF-16 code units). A record without an
    eventID is broken by the hash of its payload, after "~" so it stays apart from
    every hex eventID; two such records that still tie are the same bytes.
    """
    return F.coalesce(F.hex(event_id), F.concat(F.lit("~"), F.sha2(payload, 256)))


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
