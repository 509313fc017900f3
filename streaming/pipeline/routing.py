"""Stage 1b of decoding: which raw table each record lands in.

A plain DynamoDB table has one raw table, which takes all of its records. A single-
table design (a contract with `entities`) has one raw table per entity and one for the
items no entity matches (`unrouted`). An entity's `Route` reads the item's keys, which
every record carries (INSERT and MODIFY in NewImage, REMOVE in Keys or OldImage, in
both AWS formats), and may read one attribute of the image; a REMOVE is routed by its
OldImage, the item as it was. Entities never overlap (the contract loader refuses
rules that could), so a record lands in exactly one raw table of its DynamoDB table.

An item can change entity: a Put replacing a USER item with an INVOICE item at the
same key arrives as a MODIFY whose OldImage routes elsewhere than its NewImage. The
raw table the item left then gets a tombstone for the key (a REMOVE row with the
change's eventID and time), so the item is current in exactly one raw table. A stream
without old images (view type NEW_IMAGE) cannot show such a move, and its REMOVEs
cannot be routed by an attribute; they land in the unrouted table (docs/architecture.md).

This is the only routing code: the stream, backfills, reprocessing and replays all
decode through it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.contracts.model import Route, TableContract

_STRING_DESCRIPTOR = T.StructType([T.StructField("S", T.StringType())])


@dataclass(frozen=True)
class Routing:
    """Per raw table (keyed like the contracts): the condition that a record lands there,
    and the condition that it moves its item out of there (a tombstone lands there)."""

    lands: dict[str, Column]
    leaves: dict[str, Column]


def route_records(contracts: Mapping[str, TableContract]) -> tuple[tuple[Column, ...], Routing]:
    """The columns routing reads, to be added to the parsed records (envelope.py's
    projections), and the routing, whose conditions read them.

    Each routed DynamoDB table's routing values are parsed once per record, as S text:
    the key attributes from the record's Keys when its routes read keys only, else the
    keys and the compared attributes from its image.
    """
    routed_tables = sorted({contract.table for contract in contracts.values() if contract.is_routed})
    belongs = {
        contract.table: (F.col("_source_table") == contract.table) & F.col("_record_error").isNull()
        for contract in contracts.values()
    }
    columns: list[Column] = []
    for index, table in enumerate(routed_tables):
        sample = next(contract for contract in contracts.values() if contract.table == table)
        attributes = _route_attributes(contracts, table)
        values_schema = _values_schema([*sample.key_attributes, *attributes])
        if attributes:
            values = F.from_json("_image", values_schema)
        else:
            # Key rules read the record's Keys, a few bytes, rather than the whole image
            # (which holds the keys too, for a record without Keys).
            values = F.when(F.col("_keys").isNotNull(), F.from_json("_keys", values_schema)).otherwise(
                F.from_json("_image", values_schema)
            )
        columns.append(F.when(belongs[table], values).alias(_new(index)))
        if attributes:
            # A REMOVE's attribute values, and a MODIFY's item before the change.
            columns.append(
                F.when(belongs[table], F.from_json("_old_image", _values_schema(attributes))).alias(_old(index))
            )

    lands: dict[str, Column] = {}
    leaves: dict[str, Column] = {}
    for name, contract in contracts.items():
        if not contract.is_routed:
            lands[name] = belongs[contract.table]
            leaves[name] = F.lit(False)
            continue
        index = routed_tables.index(contract.table)
        routes = [other.route for other in contracts.values() if other.table == contract.table and other.route]
        keys = F.col(_new(index))
        if not _route_attributes(contracts, contract.table):
            now = [_matches(route, contract, keys, None) for route in routes]
            lands[name] = belongs[contract.table] & _lands(contract.route, now, contract, keys, None)
            # Key-only routes: an item's keys never change, so neither does its raw table.
            leaves[name] = F.lit(False)
            continue
        old = F.col(_old(index))
        old_values = {attribute: old[attribute]["S"] for attribute in _route_attributes(contracts, contract.table)}
        # A REMOVE is routed by the item as it was; INSERT and MODIFY by the item as it is.
        values_now = {
            attribute: F.when(F.col("_is_deleted"), value).otherwise(keys[attribute]["S"])
            for attribute, value in old_values.items()
        }
        now = [_matches(route, contract, keys, values_now) for route in routes]
        lands[name] = belongs[contract.table] & _lands(contract.route, now, contract, keys, values_now)
        before = [_matches(route, contract, keys, old_values) for route in routes]
        leaves[name] = (
            belongs[contract.table]
            & (F.col("_event_name") == "MODIFY")
            & F.col("_old_image").isNotNull()
            & _lands(contract.route, before, contract, keys, old_values)
            & ~lands[name]
        )
    return tuple(columns), Routing(lands=lands, leaves=leaves)


def _lands(
    route: Route | None,
    every_route: list[Column],
    contract: TableContract,
    keys: Column,
    values: Mapping[str, Column] | None,
) -> Column:
    """An entity takes the items its route matches; the unrouted table those no route matches."""
    if route is not None:
        return _matches(route, contract, keys, values)
    return ~reduce(Column.__or__, every_route)


def _matches(route: Route, contract: TableContract, keys: Column, values: Mapping[str, Column] | None) -> Column:
    """Whether an item matches `route` (never null): every condition given holds.
    `keys` holds the key attributes' descriptors, `values` each compared attribute's S text."""
    conditions: list[Column] = []
    if route.partition_key_prefix is not None:
        conditions.append(keys[contract.partition_key]["S"].startswith(route.partition_key_prefix))
    if route.sort_key_prefix is not None:
        assert contract.sort_key is not None  # checked by the contract loader
        conditions.append(keys[contract.sort_key]["S"].startswith(route.sort_key_prefix))
    if route.sort_key_equals is not None:
        assert contract.sort_key is not None  # checked by the contract loader
        conditions.append(keys[contract.sort_key]["S"] == F.lit(route.sort_key_equals))
    if route.attribute is not None:
        assert values is not None  # an attribute route always has its values parsed
        conditions.append(values[route.attribute] == F.lit(route.equals))
    return F.coalesce(reduce(Column.__and__, conditions), F.lit(False))


def _route_attributes(contracts: Mapping[str, TableContract], table: str) -> list[str]:
    """The non-key attributes the routes of one DynamoDB table compare, in a stable order."""
    return sorted({
        contract.route.attribute
        for contract in contracts.values()
        if contract.table == table and contract.route is not None and contract.route.attribute is not None
    })


def _values_schema(names: list[str]) -> T.StructType:
    return T.StructType([T.StructField(name, _STRING_DESCRIPTOR) for name in dict.fromkeys(names)])


def _new(table_index: int) -> str:
    return f"__route_values_{table_index}"


def _old(table_index: int) -> str:
    return f"__route_old_values_{table_index}"
