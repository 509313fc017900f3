"""Stage 3 of decoding: what an image holds that its contract does not name.

Top-level attributes, and fields inside declared M values (also inside the M items of a
declared L, at any depth), land in `_extra_attributes` (decode.py says how a path is
written). Only rows whose image may hold an undeclared field (`may_hold_undeclared`)
build the object.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.contracts.model import AttributeSpec, TableContract
from streaming.pipeline.attributes import DESCRIPTORS, IMAGE_MISFIT

# Descriptor texts inside an M value, and item texts of an L value.
_M_FIELDS = T.StructType([T.StructField("M", DESCRIPTORS)])
_L_ITEMS = T.StructType([T.StructField("L", T.ArrayType(T.StringType()))])
# One kept field of `_extra_attributes`: its path and its descriptor's JSON text.
_EXTRA_ENTRY = T.StructType([T.StructField("path", T.StringType()), T.StructField("descriptor", T.StringType())])
# The end of a JSON object key: its closing quote and the colon after it.
_KEY_END = r'"\s*:'
# A field name without path characters (`.`, `[`, `]`, `"`) is written bare in an
# `_extra_attributes` path; any other is quoted.
_BARE_NAME = r'^[^.\[\]"]+$'


def extra_attributes(contract: TableContract, typed_image: Column, read: Column) -> Column:
    """A JSON object of the image's fields the contract does not name, at any depth:
    path -> DynamoDB JSON descriptor, members sorted by path; null when there are none.

    Only a record whose image may hold an undeclared field pays for building the
    object; `may_hold_undeclared` tells them apart without parsing the image again.
    """
    names = F.array(*[F.lit(spec.name) for spec in contract.attributes])
    containers = _container_attributes(contract)

    def undeclared_entries(attributes: Column) -> Column:
        return F.concat(
            _path_entries(F.map_filter(attributes, lambda name, _: ~F.array_contains(names, name)), None),
            *[
                _undeclared_entries(attributes[spec.name], spec, _child_path(None, F.lit(spec.name)))
                for spec in containers
            ],
        )

    entries = _bind(F.from_json("_image", DESCRIPTORS), undeclared_entries)
    members = F.transform(
        F.array_sort(entries),
        lambda entry: F.concat(
            _json_string(entry["path"]), F.lit(":"), F.coalesce(entry["descriptor"], F.lit("null"))
        ),
    )
    as_object = F.nullif(F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}")), F.lit("{}"))
    return F.when(read & may_hold_undeclared(contract, typed_image), as_object)


def may_hold_undeclared(contract: TableContract, typed_image: Column) -> Column:
    """False only when the image holds no field its contract does not name, at any depth.

    Every key of a JSON object is a string followed by a colon, so the image text holds
    at least as many matches of `_KEY_END` as keys (more when a string value holds an
    escaped quote before a colon). The typed image accounts for some of its keys: each
    declared attribute and field present, and each type key and `NULL` key read inside
    their descriptors; each of those is a distinct key of the text. When the two counts
    are equal, every key of the image is accounted for, so none is undeclared. Anything
    the typed image cannot account for (an undeclared name, a JSON null, an unexpected
    descriptor key, an escaped quote before a colon) makes the counts differ, and the
    object is then built, which decides exactly.

    An image that did not fit its typed schema is decoded attribute by attribute
    elsewhere, and its typed values are all null: it counts as possibly holding one.
    """
    accounted = reduce(
        Column.__add__, [_keys_of_named(typed_image[spec.name], spec) for spec in contract.attributes], F.lit(0)
    )
    return typed_image[IMAGE_MISFIT].isNotNull() | (F.regexp_count("_image", F.lit(_KEY_END)) != accounted)


def _container_attributes(contract: TableContract) -> list[AttributeSpec]:
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


def _keys_of_named(descriptor: Column, spec: AttributeSpec) -> Column:
    """The keys a named value accounts for: its name when it is present, and its descriptor's."""
    return F.when(descriptor.isNotNull(), F.lit(1) + _keys_of_descriptor(descriptor, spec)).otherwise(F.lit(0))


def _keys_of_descriptor(descriptor: Column, spec: AttributeSpec) -> Column:
    """The keys a typed descriptor accounts for (0 when it is null): its type key and
    `NULL` when read, and inside an M the declared fields present, inside an L its items'."""
    value = descriptor[spec.type]
    count = _one_when_read(value) + _one_when_read(descriptor["NULL"])
    if spec.type == "M":
        return reduce(Column.__add__, [_keys_of_named(value[field.name], field) for field in spec.fields], count)
    if spec.type == "L":
        assert spec.items is not None
        item_spec = spec.items
        items = F.aggregate(value, F.lit(0), lambda total, item: total + _keys_of_descriptor(item, item_spec))
        return count + F.coalesce(items, F.lit(0))
    return count


def _one_when_read(value: Column) -> Column:
    return F.when(value.isNotNull(), F.lit(1)).otherwise(F.lit(0))


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
