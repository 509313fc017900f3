"""Stage 3 of decoding: what an image holds that its contract does not name.

Top-level attributes, and fields inside declared M values (also inside the M items of a
declared L, at any depth), land in `_extra_attributes` (decode.py says how a path is
written). Only rows whose outline shows an undeclared field build the object.
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
# A field name without path characters (`.`, `[`, `]`, `"`) is written bare in an
# `_extra_attributes` path; any other is quoted.
_BARE_NAME = r'^[^.\[\]"]+$'


def extra_attributes(
    contract: TableContract, typed_image: Column, outline: Column, read: Column
) -> Column:
    """A JSON object of the image's fields the contract does not name, at any depth:
    path -> DynamoDB JSON descriptor, members sorted by path; null when there are none.

    Every read row lists its top-level keys and, for a contract that declares M
    values, reads their outline (one more parse of the image); only a record where
    these show an undeclared field pays for building the object.
    """
    names = F.array(*[F.lit(spec.name) for spec in contract.attributes])
    containers = container_attributes(contract)
    checks = [F.size(F.array_except(F.json_object_keys("_image"), names)) > 0]
    if containers:
        # An image that did not fit its typed schema is decoded attribute by attribute
        # elsewhere; its typed values cannot be trusted here, so its object is built.
        checks.append(typed_image[IMAGE_MISFIT].isNotNull())
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

    entries = _bind(F.from_json("_image", DESCRIPTORS), undeclared_entries)
    members = F.transform(
        F.array_sort(entries),
        lambda entry: F.concat(
            _json_string(entry["path"]), F.lit(":"), F.coalesce(entry["descriptor"], F.lit("null"))
        ),
    )
    as_object = F.nullif(F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}")), F.lit("{}"))
    return F.when(read & has_undeclared, as_object)


def container_attributes(contract: TableContract) -> list[AttributeSpec]:
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


def outline_schema(contract: TableContract) -> T.StructType:
    """from_json schema of the outline of an image's declared M values (also inside
    L items): the field names in each, down to the deepest declared one.

    Fields below that depth are read as text and the other attributes are skipped,
    so this parse costs about half the typed one (measured on generated orders); it
    is what tells a record with undeclared nested fields from one without.
    """
    return T.StructType(
        [T.StructField(spec.name, _descriptor_outline(_outline_depth(spec))) for spec in container_attributes(contract)]
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
