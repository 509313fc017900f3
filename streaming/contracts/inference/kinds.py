"""Which kinds of item a table holds, and the match rule of each: the entities.

In this order:

1. An attribute on every item named like a type (`type`, `entityType`, `_et`,
   `__typename`, ...): one kind per value.
2. Else the keys. Each key value is read as a prefix and a shape: `USER#u7` has the prefix
   `USER#` and the shape `USER#*`, `ORDER#1#LINE#2` the shape `ORDER#*#LINE#*`, and the
   last segment is always a value, so `state#OR` and `state#WA` are both `state#*` (one
   kind holding one value in its key). A sort key without a prefix that several items
   share (`PROFILE`, `METADATA`, `root`, `A`) is matched whole: many designs keep an
   item's own record under such a constant. The rules read the sort key alone, the
   partition key alone, or both (`USER#` under `GAME#` is another kind than `USER#` under
   `USER#`), whichever routes the most items, the simpler on a tie. A kind whose items
   hold different values of an attribute named like a type (held by most of them: users
   and organizations both under `ACCOUNT#`), or shapes its prefixes cannot tell apart,
   is split by that attribute, its rule reading the keys and the attribute.
3. Else, when no key has a prefix, an attribute named like a type that most items hold.
4. Else any other text attribute on every item whose values' items each hold an
   attribute no other value's items hold (a `status` does not).

A kind with fewer than `min_items` items, one no rule can tell apart from another
(`ORDER#1` and `ORDER#1#LINE#2` without a type attribute), or one whose rule could take
another kind's items, gets no rule: it stays unrouted, with the reason.

Kinds are named from what identifies them: a type value (`users`), also the one value a
type-named attribute has on the items of a kind the keys route; else the words of
the key shapes (`ORDER#*#LINE#*` gives `order_lines`). An item's own record (a constant
sort key, or one repeating the partition key's id: `#METADATA#u7` under `USER#u7`) is
named by its partition key (`users`); a partition key prefix every item shares
(`TENANT#`) says nothing and is left out; otherwise both keys name it (`USER#` under
`GAME#` gives `game_users`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from streaming.contracts.inference.keys import KeyDecision
from streaming.contracts.inference.sample import MAX_KINDS, AttributeStats, DynamoItem
from streaming.contracts.loader import snake_case
from streaming.contracts.model import Route
from streaming.contracts.names import SQL_NAME, without_accents

# A kind seen once may be a stray item; two items at least make an entity by default.
DEFAULT_MIN_ENTITY_ITEMS = 2
# Attribute names (compared in lower case without `_` and `-`) that state an item's kind.
DISCRIMINATOR_NAMES = ("type", "entitytype", "et", "typename", "kind", "entity", "itemtype", "recordtype")
# A key value's prefix: a word and `#`, optionally after one sorting mark (`#METADATA#`
# sorts before the partition's other items).
_KEY_PREFIX = re.compile(r"[#$_]?[A-Za-z][A-Za-z0-9_-]*#")
# A sort key matched whole: a word without `#` (`PROFILE`, `root`, `A`, `v0`).
_WHOLE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
# More distinct whole sort keys than this are values (names, codes), not constants.
MAX_WHOLE_SORT_KEYS = 8
# Share of a kind's items that must hold a type attribute for it to split the kind.
_TYPE_SHARE = 0.5
_SORT_KEY, _PARTITION_KEY = "sort key", "partition key"


@dataclass(frozen=True)
class KeyPart:
    """One key value read for routing: its prefix and shape, or the whole value."""

    prefix: str | None = None  # `USER#`
    shape: str | None = None  # `USER#*`, or the whole value
    whole: bool = False  # matched as the whole value (`PROFILE`)

    @property
    def rule(self) -> tuple[str, str] | None:
        if self.shape is None:
            return None
        return ("whole", self.shape) if self.whole else ("prefix", str(self.prefix))


@dataclass
class Kind:
    name: str  # the discriminator value or the key shapes, as the report names the kind
    items: list[DynamoItem]
    route: dict[str, str] | None = None
    entity_name: str = ""
    how: str = ""
    why: str = ""  # why it stays unrouted
    named: str = ""  # why the entity has its name
    # The key shapes of its items, per key (`partition key` -> `USER#*`), when one each.
    shapes: dict[str, KeyPart] = field(default_factory=dict)


def find_kinds(items: list[DynamoItem], decision: KeyDecision, stats: Mapping[str, AttributeStats],
                min_items: int) -> tuple[list[Kind], str]:
    keys = {decision.partition_key, decision.sort_key}
    named = [name for name in stats if name not in keys and _looks_like_discriminator(name)]
    for name in named:
        kinds = _kinds_by_attribute(items, name, stats[name])
        if kinds is not None:
            return _routable(kinds, min_items, decision), f"by the attribute {name!r}, named like an entity type"
    by_keys = _kinds_by_keys(items, decision, named)
    if by_keys is not None:
        kinds, how, common_prefix = by_keys
        return _routable(kinds, min_items, decision, common_prefix, named), how
    for name in named:
        everything = Kind("every item", items)
        kinds = _split_by_type(everything, {}, [name])
        if kinds != [everything]:
            return _routable(kinds, min_items, decision), (
                f"by the attribute {name!r}, named like an entity type and held by most items (the keys have no "
                "`KIND#` prefix); the items without it stay unrouted")
    for name, attribute in stats.items():
        if name in keys or name in named:
            continue
        kinds = _kinds_by_attribute(items, name, attribute)
        if kinds is not None and _each_has_own_attribute(kinds):
            return _routable(kinds, min_items, decision), (
                f"by the attribute {name!r}: few values, on every item, and each "
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


# --------------------------------------------------------------------------- kinds by the keys


def _text(item: DynamoItem, name: str) -> str | None:
    value = item.get(name)
    text = value.get("S") if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def _key_part(text: str | None, whole_values: frozenset[str] = frozenset()) -> KeyPart:
    """`USER#u7` -> prefix `USER#`, shape `USER#*`; a value of `whole_values` -> itself."""
    if text is None:
        return KeyPart()
    match = _KEY_PREFIX.match(text)
    if match is None:
        return KeyPart(shape=text, whole=True) if text in whole_values else KeyPart()
    prefix = match.group(0)
    rest = text[len(prefix):]
    if not rest:
        return KeyPart(prefix, prefix)
    word = prefix.strip("#$_")
    marker = (re.compile(r"[A-Z][A-Z_]*") if word.isupper() else
              re.compile(r"[a-z][a-z_]*") if word.islower() else re.compile(r"[A-Za-z][A-Za-z_]*"))
    segments = rest.split("#")
    # Segments alternate value, marker, value...; the last one is always a value.
    shaped = [segment if index % 2 == 1 and index < len(segments) - 1 and marker.fullmatch(segment) else "*"
              for index, segment in enumerate(segments)]
    return KeyPart(prefix, prefix + "#".join(shaped))


def _whole_sort_keys(items: list[DynamoItem], partition_key: str, sort_key: str) -> frozenset[str]:
    """Sort keys without a prefix that several items share (`PROFILE` under each user).
    None when there are many such values, which are then data, not constants; nor when
    most partition keys have no `KIND#` prefix: such a constant is an item's own record
    under a partition that names its kind, and without one it is a value (`ACTIVE`)."""
    prefixed = sum(1 for item in items if _KEY_PREFIX.match(_text(item, partition_key) or "") is not None)
    if prefixed * 2 <= len(items):
        return frozenset()
    counts = Counter(text for item in items
                     if (text := _text(item, sort_key)) is not None and _KEY_PREFIX.match(text) is None
                     and _WHOLE_KEY.fullmatch(text) and re.search(r"[A-Za-z]", text))
    shared = frozenset(text for text, count in counts.items() if count >= 2)
    return shared if len(shared) <= MAX_WHOLE_SORT_KEYS else frozenset()


def _kinds_by_keys(items: list[DynamoItem], decision: KeyDecision,
                   type_names: list[str]) -> tuple[list[Kind], str, str | None] | None:
    """Kinds by the prefixes and shapes of both keys (module docstring, step 2), the
    routing sentence, and the partition key prefix every item shares (if any)."""
    dimensions = [(label, name) for label, name in ((_SORT_KEY, decision.sort_key),
                                                    (_PARTITION_KEY, decision.partition_key))
                  if name and decision.types[name] == "S"]
    if not dimensions:
        return None
    reads_sort_key = decision.sort_key is not None and _SORT_KEY in dict(dimensions)
    whole = (_whole_sort_keys(items, decision.partition_key, decision.sort_key)
             if reads_sort_key and decision.sort_key else frozenset())
    parts = [{label: _key_part(_text(item, name), whole if label == _SORT_KEY else frozenset())
              for label, name in dimensions} for item in items]
    if all(part.rule is None for item_parts in parts for part in item_parts.values()):
        return None
    choices = [[label] for label, _ in dimensions] + ([[_PARTITION_KEY, _SORT_KEY]] if len(dimensions) == 2 else [])
    best: tuple[int, list[Kind], list[str]] | None = None
    for chosen in choices:
        kinds = _kinds_on(items, parts, chosen, type_names)
        routed = sum(len(kind.items) for kind in kinds if kind.route is not None)
        if best is None or routed > best[0]:
            best = (routed, kinds, chosen)
    assert best is not None
    routed, kinds, chosen = best
    if not routed:
        return None
    partition_prefixes = {item_parts[_PARTITION_KEY].prefix for item_parts in parts} if any(
        label == _PARTITION_KEY for label, _ in dimensions) else set()
    common_prefix = next(iter(partition_prefixes)) if len(partition_prefixes) == 1 else None
    how = "by the " + " and ".join(chosen) + " (a `KIND#` prefix" + (
        ", or a whole sort key several items share such as " + ", ".join(repr(value) for value in sorted(whole)[:3])
        if whole and _SORT_KEY in chosen else "") + ")"
    split = sorted({kind.route["attribute"] for kind in kinds if kind.route and "attribute" in kind.route})
    if split:
        how += (f"; where the keys hold several kinds, also by the attribute {', '.join(map(repr, split))}, "
                "named like an entity type")
    return _without_overlaps(kinds), how, common_prefix


_RULE_FIELDS = {(_PARTITION_KEY, "prefix"): "partition_key_prefix", (_SORT_KEY, "prefix"): "sort_key_prefix",
                (_SORT_KEY, "whole"): "sort_key_equals"}


def _kinds_on(items: list[DynamoItem], parts: list[dict[str, KeyPart]], chosen: list[str],
              type_names: list[str]) -> list[Kind]:
    """The kinds when the rules read the keys `chosen`: one per combination of their
    prefixes (or whole values), routable when its items have one key shape."""
    groups: dict[tuple[tuple[str, str] | None, ...], list[int]] = {}
    for index, item_parts in enumerate(parts):
        groups.setdefault(tuple(item_parts[label].rule for label in chosen), []).append(index)
    kinds: list[Kind] = []
    for rules, members in groups.items():
        # The shapes of the keys the rules read, and of any other key whose shapes differ.
        labels = [label for label in sorted(parts[members[0]])
                  if label in chosen or len({parts[index][label].shape for index in members}) > 1]
        shapes = sorted({tuple(parts[index][label].shape or "(no prefix)" for label in labels) for index in members})
        shown = " / ".join(" ".join(shape) for shape in shapes)
        kind = Kind(shown, [items[index] for index in members])
        conditions: dict[str, str] = {}
        if None in rules:
            missing = " and ".join(label for label, rule in zip(chosen, rules) if rule is None)
            kind.why = f"its {missing} has no `KIND#` prefix to match on"
        else:
            conditions = {_RULE_FIELDS[(label, rule[0])]: rule[1] for label, rule in zip(chosen, rules)
                          if rule is not None}
            if len(shapes) > 1:
                kind.why = (f"{len(shapes)} key shapes ({shown}) share the prefix, and a prefix rule cannot tell "
                            "them apart; a type attribute could")
            else:
                kind.route = conditions
                kind.name = " ".join(rule[1] for rule in rules if rule is not None)
                kind.how = Route(**conditions).describe()
                kind.shapes = dict(parts[members[0]])
        kinds += _split_by_type(kind, conditions, type_names)
    return kinds


def _split_by_type(kind: Kind, conditions: dict[str, str], type_names: list[str]) -> list[Kind]:
    """The kind split by an attribute named like a type that most of its items hold with
    two values or more, each value's rule the kind's key conditions and the value; the
    kind itself when none does. A kind the keys route already is split only when each
    value's items hold an attribute the others' do not: a payment's `Type` (GiftCard,
    MasterCard) names no entity."""
    for name in type_names:
        values = Counter(text for item in kind.items if (text := _text(item, name)) is not None)
        if not 2 <= len(values) <= MAX_KINDS or sum(values.values()) <= len(kind.items) * _TYPE_SHARE:
            continue
        split = []
        for value in values:
            route = {**conditions, "attribute": name, "equals": value}
            members = [item for item in kind.items if _text(item, name) == value]
            split.append(Kind(value, members, route, how=Route(**route).describe()))
        if kind.route is not None and not _each_has_own_attribute(split):
            continue
        without = [item for item in kind.items if _text(item, name) is None]
        if without:
            split.append(Kind(f"{kind.name} without {name}", without,
                              why=f"the items of {kind.name} are of several kinds told apart by {name!r}, which "
                                  "these items do not hold"))
        return split
    return [kind]


def _without_overlaps(kinds: list[Kind]) -> list[Kind]:
    """The loader refuses two rules one item could match: of two such kinds the larger
    keeps its rule (the other stays unrouted, saying which rule it would share)."""
    kept: list[Kind] = []
    for kind in sorted(kinds, key=lambda k: (k.route is None, -len(k.items), k.name)):
        if kind.route is None:
            continue
        route = Route(**kind.route)
        clash = next((other for other in kept if route.may_overlap(Route(**other.route or {}))), None)
        if clash is None:
            kept.append(kind)
            continue
        kind.why = f"its rule ({kind.how}) could also take the items of kind {clash.name} ({clash.how})"
        kind.route = None
    return kinds


# --------------------------------------------------------------------------- names


def _routable(kinds: list[Kind], min_items: int, decision: KeyDecision,
              common_prefix: str | None = None, type_names: list[str] | None = None) -> list[Kind]:
    """Kinds with enough items keep their rule and get an entity name; the rest stay unrouted."""
    names: set[str] = set()
    for kind in sorted(kinds, key=lambda k: (-len(k.items), k.name)):
        if kind.route is not None and len(kind.items) < min_items:
            kind.route = None
            kind.why = f"fewer items than --min-entity-items {min_items}; its rule would be {kind.how}"
        if kind.route is None:
            continue
        words, kind.named = _name_of(kind, common_prefix, decision, type_names or [])
        # Accented letters stay letters (`Bücher` -> `buchers`), as in attribute columns.
        derived = snake_case(without_accents(words))
        base = _plural(derived) if derived else "kind"
        base = base if SQL_NAME.fullmatch(base) else f"kind_{base}"
        name, number = base, 1
        while name in names:
            number += 1
            name = f"{base}_{number}"
        names.add(name)
        kind.entity_name = name
        if number > 1:
            kind.named += f"; {base} was taken, so numbered"
    return sorted(kinds, key=lambda k: (k.route is None, -len(k.items), k.name))


def _name_of(kind: Kind, common_prefix: str | None, decision: KeyDecision,
             type_names: list[str]) -> tuple[str, str]:
    """The words an entity is named from, and why (module docstring)."""
    assert kind.route is not None
    if "equals" in kind.route:
        return kind.route["equals"], f"named from its {kind.route['attribute']} value"
    for name in type_names:
        values = Counter(text for item in kind.items if (text := _text(item, name)) is not None)
        if len(values) == 1 and values.total() * 10 >= len(kind.items) * 9:
            return next(iter(values)), f"named from the {name} value its items hold"
    partition, sort = kind.shapes.get(_PARTITION_KEY, KeyPart()), kind.shapes.get(_SORT_KEY, KeyPart())
    partition_words, sort_words = _shape_words(partition), _shape_words(sort)
    if not partition_words:
        return sort_words, "named from its sort key"
    if not sort_words:
        return partition_words, "named from its partition key"
    if _own_record(kind, sort, decision):
        return partition_words, (f"named from its partition key: its sort key ({sort.shape}) marks the item's own "
                                 "record")
    if partition.prefix == common_prefix or partition_words == sort_words:
        why = (f"every item's partition key starts with {common_prefix!r}, which tells no kind apart"
               if partition.prefix == common_prefix else "both keys name the same kind")
        return sort_words, f"named from its sort key: {why}"
    return f"{partition_words} {sort_words}", (f"named from both keys: {sort.shape} items under {partition.shape} "
                                               "partitions")


def _shape_words(part: KeyPart) -> str:
    """`ORDER#*#LINE#*` -> `ORDER LINE`; `PROFILE` -> `PROFILE`."""
    if part.shape is None:
        return ""
    return " ".join(segment for segment in re.split(r"[#$]", part.shape) if segment and segment != "*")


def _own_record(kind: Kind, sort: KeyPart, decision: KeyDecision) -> bool:
    """Whether a kind's sort key is its item's own record rather than a related item: a
    constant (`PROFILE`, `META#`), or, on nine items in ten, the partition key's own id
    (`#METADATA#u7` or `USER#u7` under `USER#u7`)."""
    if sort.whole or (sort.shape is not None and "*" not in sort.shape):
        return True
    assert decision.sort_key is not None

    def own_id(item: DynamoItem) -> bool:
        partition, sort_text = _text(item, decision.partition_key), _text(item, decision.sort_key or "")
        return bool(partition and sort_text) and partition.rsplit("#", 1)[-1] == sort_text.rsplit("#", 1)[-1]

    return sum(1 for item in kind.items if own_id(item)) * 10 >= len(kind.items) * 9


def _plural(word: str) -> str:
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    return word + "s"
