"""Stage 2 of decoding: an image's attribute values, typed by its table's contract.

Every declared attribute is read from its DynamoDB JSON descriptor (`{"N": "12.50"}`)
as the type the contract declares; nothing is inferred from the data, so an unexpected
descriptor is a reason (`type_mismatch`, `invalid_number`), never a guess.
"""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.contracts.model import AttributeSpec, TableContract
from streaming.pipeline import reasons

# DynamoDB number text: optional sign, digits with an optional fraction, optional exponent.
NUMBER_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# DynamoDB keeps at most 38 significant digits; more would be rounded somewhere downstream.
MAX_SIGNIFICANT_DIGITS = 38
# Checked with a length multiple of 4; a flat character class keeps Java's regex
# engine iterative on large binaries.
BASE64_PATTERN = r"^[A-Za-z0-9+/]*={0,2}$"

# The corrupt-record field of an image's typed schema; an attribute is unlikely to
# carry this name, and one that did would only send its rows down the slow path.
IMAGE_MISFIT = "__image_does_not_fit"
DESCRIPTORS = T.MapType(T.StringType(), T.StringType())


def image_schema(contract: TableContract) -> T.StructType:
    """from_json schema of a whole image of this table: one descriptor per attribute."""
    return T.StructType(
        [T.StructField(spec.name, _descriptor_schema(spec)) for spec in contract.attributes]
        + [T.StructField(IMAGE_MISFIT, T.StringType())]
    )


def typed_image(contract: TableContract) -> Column:
    """The record's image (`_image`) parsed by `image_schema`; an image that does not fit
    it comes back with every attribute null and its text in IMAGE_MISFIT."""
    return F.from_json("_image", image_schema(contract), {"columnNameOfCorruptRecord": IMAGE_MISFIT})


def descriptor(typed_image: Column, spec: AttributeSpec, read: Column) -> Column:
    """The attribute's descriptor parsed for its declared type; null unless `read`
    (a tombstone carries only its key: OldImage values would be stale).

    Taken from the typed image when the whole image fitted its schema. Otherwise
    this attribute's descriptor is parsed alone, so that one misfit cannot hide
    the others and the first one in contract order is the one reported.
    """
    alone = F.from_json(F.from_json("_image", DESCRIPTORS)[spec.name], _descriptor_schema(spec))
    return F.when(read, F.when(typed_image[IMAGE_MISFIT].isNull(), typed_image[spec.name]).otherwise(alone))


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


def is_missing(descriptor: Column, spec: AttributeSpec) -> Column:
    """Absent, or `{"NULL": true}`."""
    return descriptor.isNull() | (descriptor[spec.type].isNull() & F.coalesce(descriptor["NULL"], F.lit(False)))


def attribute_value(descriptor: Column, spec: AttributeSpec) -> Column:
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
        return F.transform(value, lambda item: attribute_value(item, item_spec))
    if spec.type == "M":
        return F.when(
            value.isNotNull(),
            F.struct(*[attribute_value(value[field.name], field).alias(field.column) for field in spec.fields]),
        )
    return value


def attribute_error(descriptor: Column, spec: AttributeSpec, path: str) -> Column:
    """The first problem of one descriptor as a quarantine reason, or null."""
    value = descriptor[spec.type]
    mismatch = descriptor.isNotNull() & value.isNull() & ~F.coalesce(descriptor["NULL"], F.lit(False))
    return F.when(mismatch, reasons.type_mismatch(path, spec.type)).otherwise(_content_error(value, spec, path))


def _content_error(value: Column, spec: AttributeSpec, path: str) -> Column:
    if spec.type == "N":
        return F.when(~_is_number(value), reasons.invalid_number(path))
    if spec.type == "NS":
        return F.when(
            F.exists(value, lambda number: ~F.coalesce(_is_number(number), F.lit(False))), reasons.invalid_number(path)
        )
    if spec.type == "SS":
        # DynamoDB holds no null in a set (boto3's TypeSerializer refuses one), so such
        # a set is not DynamoDB's: its record is quarantined, as a null in NS or BS is.
        return F.when(F.exists(value, lambda text: text.isNull()), reasons.type_mismatch(path, "SS"))
    if spec.type == "B":
        return F.when(~_is_base64(value), reasons.type_mismatch(path, "B"))
    if spec.type == "BS":
        return F.when(
            F.exists(value, lambda text: ~F.coalesce(_is_base64(text), F.lit(False))), reasons.type_mismatch(path, "BS")
        )
    if spec.type == "L":
        assert spec.items is not None
        item_spec = spec.items
        item_errors = F.transform(value, lambda item: attribute_error(item, item_spec, f"{path}[]"))
        return F.get(F.filter(item_errors, lambda error: error.isNotNull()), 0)
    if spec.type == "M":
        return F.coalesce(
            *[attribute_error(value[field.name], field, f"{path}.{field.name}") for field in spec.fields]
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
