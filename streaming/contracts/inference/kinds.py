"""Which kinds of item a table holds, and the match rule of each: the entities.

In this order: an attribute on every item named like a type (`type`, `entityType`,
`_et`, `__typename`, ...), one kind per value; else key prefixes (`USER#...`) on the sort
key, the partition key or both, whichever routes the most items; else any other text
attribute on every item whose values' items each hold an attribute no other value's
items hold (a `status` does not). A kind with fewer than `min_items` items, or one no
prefix can tell apart from another (`ORDER#1` and `ORDER#1#LINE#2`), gets no rule: it
stays unrouted, with the reason.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streaming.contracts.inference.keys import KeyDecision
from streaming.contracts.inference.sample import MAX_KINDS, AttributeStats, DynamoItem
from streaming.contracts.loader import snake_case
from streaming.contracts.names import SQL_NAME

# A kind seen once may be a stray item; two items at least make an entity by default.
DEFAULT_MIN_ENTITY_ITEMS = 2
# Attribute names (compared in lower case without `_` and `-`) that state an item's kind.
DISCRIMINATOR_NAMES = ("type", "entitytype", "et", "typename", "kind", "entity", "itemtype", "recordtype")
# A key value `USER#u7` has the prefix `USER#`; a later all-capitals segment (`#LINE#`) is
# part of the key's shape, the rest are ids.
_KEY_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)#")
_SHAPE_WORD = re.compile(r"[A-Z][A-Z_]+")


@dataclass
class Kind:
    name: str  # the discriminator value or the key prefixes, as the report names the kind
    items: list[DynamoItem]
    route: dict[str, str] | None = None
    entity_name: str = ""
    how: str = ""
    why: str = ""  # why it stays unrouted


def find_kinds(items: list[DynamoItem], decision: KeyDecision, stats: Mapping[str, AttributeStats],
                min_items: int) -> tuple[list[Kind], str]:
    keys = {decision.partition_key, decision.sort_key}
    named = [name for name in stats if name not in keys and _looks_like_discriminator(name)]
    for name in named:
        kinds = _kinds_by_attribute(items, name, stats[name])
        if kinds is not None:
            return _routable(kinds, min_items), f"by the attribute {name!r}, named like an entity type"
    prefixed = _kinds_by_key_prefix(items, decision)
    if prefixed is not None:
        kinds, where = prefixed
        return _routable(kinds, min_items), f"by the {where} prefix (`KIND#...`)"
    for name, attribute in stats.items():
        if name in keys or name in named:
            continue
        kinds = _kinds_by_attribute(items, name, attribute)
        if kinds is not None and _each_has_own_attribute(kinds):
            return _routable(kinds, min_items), (f"by the attribute {name!r}: few values, on every item, and each "
                                                 "value's items hold an attribute no other value's items hold")
    return [], "one kind of item: no discriminator attribute and no key prefix tells kinds apart"


def _looks_like_discriminator(name: str) -> bool:
    return re.sub(r"[_-]", "", name).lower() in DISCRIMINATOR_NAMES


def _kinds_by_attribute(items: list[DynamoItem], name: str, stats: AttributeStats) -> list[Kind] | None:
    """One kind per value of an S attribute on every item; None when it is not one."""
    if stats.present != len(items) or set(stats.types) != {"S"} or not 2 <= len(stats.distinct) <= MAX_KINDS:
        return None
    groups: dict[str, list[DynamoItem]] = {}
    for item in items:
        groups.setdefault(item[name]["S"], []).append(item)
    return [Kind(value, group, {"attribute": name, "equals": value}, how=f"{name} = {value!r}")
            for value, group in groups.items()]


def _each_has_own_attribute(kinds: list[Kind]) -> bool:
    """Whether each kind's items all hold an attribute that no item of another kind holds:
    what tells an entity type (users have `email`, invoices `amount`) from a status (a
    PAID order holds what a PLACED one does)."""
    held_by_all = [set.intersection(*(set(item) for item in kind.items)) for kind in kinds]
    held_by_any = [set().union(*(set(item) for item in kind.items)) for kind in kinds]
    return all(
        own - set().union(*(held_by_any[other] for other in range(len(kinds)) if other != index))
        for index, own in enumerate(held_by_all)
    )


def _prefix(value: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(`USER#`, shape `USER#*#LINE#*`) of an S key value; (None, None) without a prefix."""
    text = value.get("S") if isinstance(value, dict) else None
    match = _KEY_PREFIX.match(text) if isinstance(text, str) else None
    if match is None:
        return None, None
    segments = text.split("#")
    shape = "#".join([segments[0], *(s if _SHAPE_WORD.fullmatch(s) else "*" for s in segments[1:])])
    return match.group(0), shape


def _kinds_by_key_prefix(items: list[DynamoItem], decision: KeyDecision) -> tuple[list[Kind], str] | None:
    """Kinds by the shape of their keys. The rule uses the sort key's prefix when it tells
    every kind apart, else the partition key's, else both; kinds one prefix cannot tell
    apart (`ORDER#*` and `ORDER#*#LINE#*`) get no rule."""
    dimensions = [("sort key", decision.sort_key), ("partition key", decision.partition_key)]
    dimensions = [(label, name) for label, name in dimensions if name and decision.types[name] == "S"]
    if not dimensions:
        return None
    groups: dict[tuple[tuple[str | None, str | None], ...], list[DynamoItem]] = {}
    for item in items:
        groups.setdefault(tuple(_prefix(item.get(name)) for _, name in dimensions), []).append(item)
    if len(groups) < 2 or all(prefix is None for signature in groups for prefix, _ in signature):
        return None
    best: tuple[int, list[Kind], str] | None = None
    choices = [[index] for index in range(len(dimensions))] + ([[0, 1]] if len(dimensions) == 2 else [])
    for chosen in choices:
        kinds = _kinds_on(groups, dimensions, chosen)
        routed = sum(len(kind.items) for kind in kinds if kind.route is not None)
        if best is None or routed > best[0]:
            best = (routed, kinds, " and ".join(dimensions[index][0] for index in chosen))
    assert best is not None
    return (best[1], best[2]) if best[0] else None


def _kinds_on(groups: Mapping[tuple[tuple[str | None, str | None], ...], list[DynamoItem]],
              dimensions: list[tuple[str, str]], chosen: list[int]) -> list[Kind]:
    by_prefixes: dict[tuple[str | None, ...], list[tuple[tuple[str | None, str | None], ...]]] = {}
    for signature in groups:
        by_prefixes.setdefault(tuple(signature[index][0] for index in chosen), []).append(signature)
    kinds = []
    for prefixes, signatures in by_prefixes.items():
        members = [item for signature in signatures for item in groups[signature]]
        shapes = " / ".join(" ".join(str(signature[index][1]) for index in chosen) for signature in signatures)
        kind = Kind(shapes, members)
        if None in prefixes:
            kind.why = "its key has no `KIND#` prefix to match on"
        elif len(signatures) > 1:
            kind.why = (f"{len(signatures)} key shapes ({shapes}) share the prefix, and a prefix rule cannot tell "
                        "them apart; a discriminator attribute could")
        else:
            fields = {"sort key": "sort_key_prefix", "partition key": "partition_key_prefix"}
            kind.route = {fields[dimensions[index][0]]: prefix for index, prefix in zip(chosen, prefixes)
                          if prefix is not None}
            kind.how = " and ".join(f"{dimensions[index][0]} starts with {prefix!r}"
                                    for index, prefix in zip(chosen, prefixes))
            kind.name = " ".join(prefix for prefix in prefixes if prefix)
        kinds.append(kind)
    return kinds


def _routable(kinds: list[Kind], min_items: int) -> list[Kind]:
    """Kinds with enough items keep their rule and get an entity name; the rest stay unrouted."""
    names: set[str] = set()
    for kind in sorted(kinds, key=lambda k: -len(k.items)):
        if kind.route is not None and len(kind.items) < min_items:
            kind.route = None
            kind.why = f"fewer items than --min-entity-items {min_items}; its rule would be {kind.how}"
        if kind.route is None:
            continue
        # Named by its value, or its prefixes (`ORG#` + `META#` -> org_metas), in the plural.
        words = kind.route.get("equals") or " ".join(
            kind.route[rule] for rule in ("partition_key_prefix", "sort_key_prefix") if rule in kind.route)
        base = _plural(snake_case(words)) if snake_case(words) else "kind"
        base = base if SQL_NAME.fullmatch(base) else f"kind_{base}"
        name, number = base, 1
        while name in names:
            number += 1
            name = f"{base}_{number}"
        names.add(name)
        kind.entity_name = name
    return sorted(kinds, key=lambda k: (k.route is None, -len(k.items), k.name))


def _plural(word: str) -> str:
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    return word + "s"
