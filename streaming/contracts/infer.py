"""Inferring a table contract from items: what `lakehouse contract infer` proposes.

Pure Python (no Spark): the readers in streaming/io/item_samples.py feed an `ItemSample`
with item images (from an export, landing change records or a sample file), and
`infer_contract` decides, in this order:

1. **keys**: the partition and sort key, from the records' `Keys` (or as given); the one
   with fewer distinct values is the partition key, since many items share a partition.
2. **entities**: a discriminator attribute named like one (`type`, `entityType`, `_et`,
   `__typename`, ...), else key prefixes (`USER#...` on the sort key, the partition key or
   both), else any other string attribute on every item whose values split the items into
   groups with different attributes. Each kind gets a match rule the loader's overlap
   check accepts; a kind with fewer than `min_entity_items` items, or one no rule can tell
   apart from another (`ORDER#1` and `ORDER#1#LINE#2`), stays unrouted, with its count
   and an example key.
3. **attributes** per entity: the type seen, the share of items holding it, and
   conflicts; an attribute seen with two types, or only as NULL, is left out of the
   proposal (it lands in `_extra_attributes`, where no value is quarantined).
4. **casts**, only when every sampled value fits; **PII** from names and value shapes,
   always marked as a proposal; **columns** safe on DuckDB and Athena by names.py.

proposal.py renders the result as a contract file with a comment on each
decision, and as the report.
"""
from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from streaming.contracts.loader import snake_case
from streaming.contracts.model import KEY_TYPES, MAX_DECIMAL_PRECISION, UNROUTED_SUFFIX
from streaming.contracts.names import (
    CAST_TEXT_SUFFIX,
    MAX_COLUMN_LENGTH,
    MAX_RAW_TABLE_LENGTH,
    MODEL_COLUMNS,
    SQL_NAME,
    reserved_in,
)
from streaming.errors import OperatorError

DynamoItem = dict[str, dict[str, Any]]

DEFAULT_MAX_ITEMS = 10_000
# A kind seen once may be a stray item; two items at least make an entity by default.
DEFAULT_MIN_ENTITY_ITEMS = 2
# More kinds than this from one attribute means it is not a discriminator (an id, a name).
MAX_KINDS = 64
# A decimal cast leaves room above the digits seen: 18 is the precision of the packaged
# contracts' amounts, and a value wider than its cast becomes null in staging.
MIN_DECIMAL_PRECISION = 18
# Attribute names (compared in lower case without `_` and `-`) that state an item's kind.
DISCRIMINATOR_NAMES = ("type", "entitytype", "et", "typename", "kind", "entity", "itemtype", "recordtype")
# A key value `USER#u7` has the prefix `USER#`; a later all-capitals segment (`#LINE#`) is
# part of the key's shape, the rest are ids.
_KEY_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)#")
_SHAPE_WORD = re.compile(r"[A-Z][A-Z_]+")
_KEY_HINTS = (re.compile(r"(pk|partition_?key|hash_?key)", re.I), re.compile(r"(sk|sort_?key|range_?key)", re.I))

# The text forms the dbt casts read (macros/cross_db/types.sql): ISO-8601 date-times with
# seconds, and calendar dates.
_ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DECIMAL_TEXT = re.compile(r"-?(\d+)(?:\.(\d+))?")
_BOOLEAN_TEXTS = frozenset({"true", "false"})
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
# A phone number: an optional +, then digits with separators, 7 to 15 digits (E.164), and
# at least a + or a separator, so that a plain numeric id is not one.
_PHONE = re.compile(r"\+?[0-9][0-9 ().-]{5,}[0-9]")
BIGINT_MAX = 2**63 - 1
# Integers in these ranges read as epoch times between 2000 and 2100.
_EPOCH_SECONDS = (946_684_800, 4_102_444_800)
_EPOCH_MILLIS = (_EPOCH_SECONDS[0] * 1000, _EPOCH_SECONDS[1] * 1000)
# Words of an attribute name that mark personal data; `name` alone is left undecided
# (a product or a company has one too).
_PII_WORDS = frozenset({"email", "mail", "phone", "mobile", "telephone", "msisdn", "address", "street", "postcode",
                        "zip", "zipcode", "ip", "birthday", "birthdate", "dob", "ssn", "passport", "iban",
                        "firstname", "lastname", "surname", "fullname"})
_PERSON_NAME_WORDS = frozenset({"first", "last", "full", "given", "family", "middle", "cust", "customer", "user",
                                "contact", "person", "display", "maiden"})


class InferenceError(OperatorError, ValueError):
    """The sample cannot give a contract: no items, no key, or keys that disagree."""


# --------------------------------------------------------------------------- the sample


@dataclass
class ItemSample:
    """The items inference reads: at most `max_items` distinct items, the last image of
    each (a change record's NewImage, or its OldImage for a REMOVE), in reading order."""

    max_items: int = DEFAULT_MAX_ITEMS
    items: dict[str, DynamoItem] = field(default_factory=dict)
    # The key attribute names the records stated (`Keys`), with how many stated them.
    key_names: Counter[tuple[str, ...]] = field(default_factory=Counter)
    # Key names a source declares outright (a NoSQL Workbench model's KeyAttributes).
    declared_key: tuple[str, ...] | None = None
    records_read: int = 0
    # Why records gave no item: reason -> count (not JSON, another table, no image, ...).
    skipped: Counter[str] = field(default_factory=Counter)
    stopped_early: bool = False

    @property
    def full(self) -> bool:
        return len(self.items) >= self.max_items

    def add(self, image: DynamoItem, keys: Mapping[str, Any] | None = None) -> None:
        """One record's item image; `keys` is the record's `Keys` when it has them. A key
        seen again replaces its earlier image; a new key past `max_items` stops the sample."""
        self.records_read += 1
        if keys:
            self.key_names[tuple(sorted(keys))] += 1
        identity = json.dumps(keys if keys else image, sort_keys=True)
        if identity not in self.items and self.full:
            self.stopped_early = True
            return
        self.items[identity] = image

    def skip(self, reason: str) -> None:
        self.records_read += 1
        self.skipped[reason] += 1


# --------------------------------------------------------------------------- statistics


@dataclass
class AttributeStats:
    """What the sample shows of one attribute (or a map's field, or a list's elements)."""

    present: int = 0  # values other than NULL
    nulls: int = 0
    types: Counter[str] = field(default_factory=Counter)
    # Per S value: which shapes every value had so far (None: no S value yet).
    timestamps: int = 0
    dates: int = 0
    boolean_texts: int = 0
    number_texts: int = 0
    emails: int = 0
    phones: int = 0
    ips: int = 0
    # N values: the widest integer part and scale, and whether every value is an integer.
    integers: int = 0
    integer_digits: int = 0
    scale: int = 0
    unparsed_numbers: int = 0
    epoch_seconds: int = 0
    epoch_millis: int = 0
    over_bigint: int = 0
    fields: dict[str, AttributeStats] = field(default_factory=dict)
    maps: int = 0
    items: AttributeStats | None = None
    distinct: set[str] = field(default_factory=set)

    def observe(self, value: Any) -> None:
        if not isinstance(value, dict) or len(value) != 1:
            self.types["invalid"] += 1
            self.present += 1
            return
        kind, content = next(iter(value.items()))
        if kind == "NULL":
            self.nulls += 1
            return
        self.present += 1
        self.types[kind] += 1
        if kind == "S" and isinstance(content, str):
            self._observe_text(content)
        elif kind == "N" and isinstance(content, str):
            self._observe_number(content)
        elif kind == "M" and isinstance(content, dict):
            self.maps += 1
            for name, field_value in content.items():
                self.fields.setdefault(name, AttributeStats()).observe(field_value)
        elif kind == "L" and isinstance(content, list):
            self.items = self.items or AttributeStats()
            for element in content:
                self.items.observe(element)

    def _observe_text(self, text: str) -> None:
        if len(self.distinct) <= MAX_KINDS:
            self.distinct.add(text)
        if _ISO_TIMESTAMP.fullmatch(text) and _valid_datetime(text):
            self.timestamps += 1
        if _ISO_DATE.fullmatch(text) and _valid_date(text):
            self.dates += 1
        if text.lower() in _BOOLEAN_TEXTS:
            self.boolean_texts += 1
        if _DECIMAL_TEXT.fullmatch(text):
            self.number_texts += 1
        if _EMAIL.fullmatch(text):
            self.emails += 1
        if _PHONE.fullmatch(text) and 7 <= sum(char.isdigit() for char in text) <= 15 and not text.isdigit():
            self.phones += 1
        if _is_ip(text):
            self.ips += 1

    def _observe_number(self, text: str) -> None:
        match = _DECIMAL_TEXT.fullmatch(text.strip())
        if match is None:  # exponent notation: no cast reads it exactly
            self.unparsed_numbers += 1
            return
        whole, fraction = match.group(1).lstrip("0"), (match.group(2) or "").rstrip("0")
        self.integer_digits = max(self.integer_digits, len(whole))
        self.scale = max(self.scale, len(fraction))
        if not fraction:
            self.integers += 1
            number = int(match.group(1)) * (-1 if text.startswith("-") else 1)
            if abs(number) > BIGINT_MAX:
                self.over_bigint += 1
            if _EPOCH_SECONDS[0] <= number < _EPOCH_SECONDS[1]:
                self.epoch_seconds += 1
            elif _EPOCH_MILLIS[0] <= number < _EPOCH_MILLIS[1]:
                self.epoch_millis += 1


def _valid_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _valid_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_ip(text: str) -> bool:
    if not (":" in text or text.count(".") == 3):
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def attribute_stats(items: Iterable[DynamoItem]) -> dict[str, AttributeStats]:
    stats: dict[str, AttributeStats] = {}
    for item in items:
        for name, value in item.items():
            stats.setdefault(name, AttributeStats()).observe(value)
    return stats


# --------------------------------------------------------------------------- proposals


@dataclass
class ProposedAttribute:
    """One attribute of the proposal, or one left out of it (`left_out` says why)."""

    name: str
    column: str
    type: str | None
    seen: int  # items holding a value other than NULL
    of: int  # items it could be on
    types: dict[str, int]
    cast: str | None = None
    pii: bool = False
    notes: list[str] = field(default_factory=list)  # each decision, as the YAML comment says it
    undecided: list[str] = field(default_factory=list)  # what a person has to decide
    left_out: str | None = None
    items: ProposedAttribute | None = None
    fields: list[ProposedAttribute] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.seen / self.of if self.of else 0.0

    def spec_identity(self) -> tuple[Any, ...]:
        """What must match for two entities to share the attribute as one column."""
        return (self.type, self.column, self.cast, self.pii,
                self.items.spec_identity() if self.items else None,
                tuple(field.spec_identity() for field in self.fields))


@dataclass
class ProposedEntity:
    name: str
    raw_table: str
    match: dict[str, str]
    items: int
    how: str  # how the kind was found, for its comment
    attributes: list[ProposedAttribute] = field(default_factory=list)


@dataclass
class UnroutedKind:
    kind: str
    items: int
    example_key: str
    why: str


@dataclass
class KeyDecision:
    partition_key: str
    sort_key: str | None
    types: dict[str, str]
    how: str


@dataclass
class Proposal:
    table: str
    raw_table: str | None  # a plain table's; None with entities
    unrouted_table: str | None
    key: KeyDecision
    routing: str  # how entities were found, or why the table is plain
    shared: list[ProposedAttribute]
    entities: list[ProposedEntity]
    unrouted: list[UnroutedKind]
    partition_column: str
    partition_expression: str
    items: int
    sample: ItemSample

    @property
    def undecided(self) -> list[str]:
        points = [f"{where}.{attribute.name}: {point}"
                  for where, attribute in self.attributes_with_owner() for point in attribute.undecided]
        points += [f"unrouted kind {kind.kind}: {kind.why}" for kind in self.unrouted]
        return points

    @property
    def conflicts(self) -> list[str]:
        return [f"{where}: {attribute.name} seen as "
                + ", ".join(f"{t} {n}x" for t, n in _by_count(attribute.types))
                for where, attribute in self.attributes_with_owner() if len(attribute.types) > 1]

    def attributes_with_owner(self) -> Iterable[tuple[str, ProposedAttribute]]:
        """Every attribute, nested ones too, with where it sits (`entities.users`)."""
        owners = [("attributes", self.shared)] + [(f"entities.{e.name}", e.attributes) for e in self.entities]
        for where, attributes in owners:
            for attribute in attributes:
                yield from _walk(attribute, where)


def _by_count(types: Mapping[str, int]) -> list[tuple[str, int]]:
    """Types seen, the most frequent first, ties in name order: the same text on every run."""
    return sorted(types.items(), key=lambda seen: (-seen[1], seen[0]))


def _walk(attribute: ProposedAttribute, where: str) -> Iterable[tuple[str, ProposedAttribute]]:
    yield where, attribute
    if attribute.items is not None:
        yield from _walk(attribute.items, f"{where}.{attribute.name}[]")
    for nested in attribute.fields:
        yield from _walk(nested, f"{where}.{attribute.name}")


def infer_contract(
    table: str,
    sample: ItemSample,
    *,
    key: Sequence[str] | None = None,
    min_entity_items: int = DEFAULT_MIN_ENTITY_ITEMS,
) -> Proposal:
    """The contract proposal for DynamoDB table `table` from `sample` (module docstring)."""
    items = list(sample.items.values())
    if not items:
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(sample.skipped.items()))
        raise InferenceError(f"no item of table {table!r} in the sample ({sample.records_read} records read"
                             + (f": {why}" if why else "") + "); nothing to infer a contract from")
    decision = _decide_keys(items, sample, key)
    items = _with_key(items, decision, sample)
    all_stats = attribute_stats(items)
    kinds, routing = _find_kinds(items, decision, all_stats, min_entity_items)
    base = _table_base_name(table)
    routed = [kind for kind in kinds if kind.route is not None]
    unrouted = [UnroutedKind(kind.name, len(kind.items), _example_key(kind.items[0], decision), kind.why)
                for kind in kinds if kind.route is None]
    if not routed or (len(routed) == 1 and not unrouted):
        if kinds:
            routing += (f"; {len(kinds)} kind(s) found but fewer than two routable, so one raw table holds "
                        "every item: " + "; ".join(f"{k.name} ({len(k.items)} items)" for k in kinds))
        shared = _propose_attributes(all_stats, len(items), decision, set())
        raw_table = _safe_name(base, "raw", MAX_RAW_TABLE_LENGTH)
        return _finish(table, raw_table, None, decision, routing, shared, [], [], items, sample)
    entities = [_propose_entity(kind, base, decision) for kind in routed]
    shared = _share(entities, all_stats, len(items), decision)
    unrouted_table = _safe_name(base + UNROUTED_SUFFIX, "raw", MAX_RAW_TABLE_LENGTH)
    return _finish(table, None, unrouted_table, decision, routing, shared, entities, unrouted, items, sample)


def _finish(table: str, raw_table: str | None, unrouted_table: str | None, decision: KeyDecision, routing: str,
            shared: list[ProposedAttribute], entities: list[ProposedEntity], unrouted: list[UnroutedKind],
            items: list[DynamoItem], sample: ItemSample) -> Proposal:
    _leave_out_case_twins([*shared, *(a for entity in entities for a in entity.attributes)])
    key_column = next(a.column for a in shared if a.name == decision.partition_key)
    taken = {a.column for a in shared} | {a.column for e in entities for a in e.attributes}
    partition_column = _unique_column(f"{key_column}_suffix", taken)
    text = f"hex({key_column})" if decision.types[decision.partition_key] == "B" else key_column
    return Proposal(table, raw_table, unrouted_table, decision, routing, shared, entities, unrouted,
                    partition_column, f"substring({text}, -1, 1)", len(items), sample)


# --------------------------------------------------------------------------- keys


def _decide_keys(items: list[DynamoItem], sample: ItemSample, given: Sequence[str] | None) -> KeyDecision:
    if given:
        names, how = tuple(given), "as given with --key"
    elif sample.declared_key:
        names, how = sample.declared_key, "as the sample's model declares it (KeyAttributes)"
    elif sample.key_names:
        (names, stated), *others = sample.key_names.most_common()
        if stated * 10 < sample.key_names.total() * 9:
            seen = "; ".join(f"{list(names)} in {count} records" for names, count in sample.key_names.most_common())
            raise InferenceError(f"the records' Keys name different attributes ({seen}); give the key with --key")
        names = _order_keys(names, items)
        how = "from the records' Keys"
        if others:
            how += f" ({stated} records; {sum(count for _, count in others)} others name other attributes)"
        if len(names) == 2:
            how += (f"; {names[0]} and {names[1]} named like partition and sort key" if _KEY_HINTS[0].fullmatch(names[0])
                    and _KEY_HINTS[1].fullmatch(names[1]) else
                    f"; {names[0]} has fewer distinct values than {names[1]}, so it is the partition key: check"
                    if _distinct(items, names[0]) != _distinct(items, names[1]) else
                    f"; both have {_distinct(items, names[0])} distinct values: {names[0]} taken as partition key, "
                    "check")
    else:
        names = _keys_by_name(items)
        how = "by the attributes' names (the sample has no Keys): check"
    types: dict[str, str] = {}
    for name in names:
        seen = Counter(next(iter(item[name])) for item in items if isinstance(item.get(name), dict) and item[name])
        if not seen:
            raise InferenceError(f"key attribute {name!r} is on no sampled item; give the key with --key")
        key_type, count = seen.most_common(1)[0]
        if key_type not in KEY_TYPES or count * 10 < sum(seen.values()) * 9:
            raise InferenceError(f"key attribute {name!r} is typed {dict(seen)} on the sampled items; a key is "
                                 f"one of {sorted(KEY_TYPES)} on every item: give the key with --key")
        types[name] = key_type
    return KeyDecision(names[0], names[1] if len(names) > 1 else None, types, how)


def _with_key(items: list[DynamoItem], decision: KeyDecision, sample: ItemSample) -> list[DynamoItem]:
    """The items holding every key attribute with its type; the stream quarantines the
    others (missing_key, type_mismatch), so they say nothing about the table's items."""
    kept = [item for item in items
            if all(isinstance(item.get(name), dict) and set(item[name]) == {key_type}
                   for name, key_type in decision.types.items())]
    if len(kept) < len(items):
        sample.skipped["without the key attributes (the stream quarantines them)"] += len(items) - len(kept)
    if not kept:
        raise InferenceError("no sampled item holds the key attributes " + ", ".join(decision.types))
    return kept


def _order_keys(names: tuple[str, ...], items: list[DynamoItem]) -> tuple[str, ...]:
    """Partition key first. `Keys` does not say which is which: names like `pk` and `sk`
    decide, else the one with fewer distinct values (items share a partition)."""
    if len(names) != 2:
        return names
    first, second = names
    if _KEY_HINTS[0].fullmatch(second) and _KEY_HINTS[1].fullmatch(first):
        return (second, first)
    if _KEY_HINTS[0].fullmatch(first) and _KEY_HINTS[1].fullmatch(second):
        return (first, second)
    return (second, first) if _distinct(items, first) > _distinct(items, second) else (first, second)


def _distinct(items: list[DynamoItem], name: str) -> int:
    return len({json.dumps(item.get(name), sort_keys=True) for item in items})


def _keys_by_name(items: list[DynamoItem]) -> tuple[str, ...]:
    everywhere = [name for name in items[0] if all(name in item for item in items)]
    found = [next((name for name in everywhere if hint.fullmatch(name)), None) for hint in _KEY_HINTS]
    if found[0] is None:
        raise InferenceError("the sample has no Keys (a full export or plain items) and no attribute on every item "
                             "is named like a partition key (pk, partitionKey, hashKey); give the key with "
                             "--key PARTITION[,SORT]")
    return (found[0],) if found[1] is None else (found[0], found[1])


def _example_key(item: DynamoItem, decision: KeyDecision) -> str:
    names = [decision.partition_key] + ([decision.sort_key] if decision.sort_key else [])
    return ", ".join(f"{name}={_text_of(item.get(name))}" for name in names)


def _text_of(value: Any) -> str:
    content = next(iter(value.values())) if isinstance(value, dict) and value else value
    text = str(content)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- kinds


@dataclass
class _Kind:
    name: str  # the discriminator value or the key prefixes, as the report names the kind
    items: list[DynamoItem]
    route: dict[str, str] | None = None
    entity_name: str = ""
    how: str = ""
    why: str = ""  # why it stays unrouted


def _find_kinds(items: list[DynamoItem], decision: KeyDecision, stats: Mapping[str, AttributeStats],
                min_items: int) -> tuple[list[_Kind], str]:
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


def _kinds_by_attribute(items: list[DynamoItem], name: str, stats: AttributeStats) -> list[_Kind] | None:
    """One kind per value of an S attribute on every item; None when it is not one."""
    if stats.present != len(items) or set(stats.types) != {"S"} or not 2 <= len(stats.distinct) <= MAX_KINDS:
        return None
    groups: dict[str, list[DynamoItem]] = {}
    for item in items:
        groups.setdefault(item[name]["S"], []).append(item)
    return [_Kind(value, group, {"attribute": name, "equals": value}, how=f"{name} = {value!r}")
            for value, group in groups.items()]


def _each_has_own_attribute(kinds: list[_Kind]) -> bool:
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


def _kinds_by_key_prefix(items: list[DynamoItem], decision: KeyDecision) -> tuple[list[_Kind], str] | None:
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
    best: tuple[int, list[_Kind], str] | None = None
    choices = [[index] for index in range(len(dimensions))] + ([[0, 1]] if len(dimensions) == 2 else [])
    for chosen in choices:
        kinds = _kinds_on(groups, dimensions, chosen)
        routed = sum(len(kind.items) for kind in kinds if kind.route is not None)
        if best is None or routed > best[0]:
            best = (routed, kinds, " and ".join(dimensions[index][0] for index in chosen))
    assert best is not None
    return (best[1], best[2]) if best[0] else None


def _kinds_on(groups: Mapping[tuple[tuple[str | None, str | None], ...], list[DynamoItem]],
              dimensions: list[tuple[str, str]], chosen: list[int]) -> list[_Kind]:
    by_prefixes: dict[tuple[str | None, ...], list[tuple[tuple[str | None, str | None], ...]]] = {}
    for signature in groups:
        by_prefixes.setdefault(tuple(signature[index][0] for index in chosen), []).append(signature)
    kinds = []
    for prefixes, signatures in by_prefixes.items():
        members = [item for signature in signatures for item in groups[signature]]
        shapes = " / ".join(" ".join(str(signature[index][1]) for index in chosen) for signature in signatures)
        kind = _Kind(shapes, members)
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


def _routable(kinds: list[_Kind], min_items: int) -> list[_Kind]:
    """Kinds with enough items keep their rule and get an entity name; the rest stay unrouted."""
    names: set[str] = set()
    for kind in sorted(kinds, key=lambda k: -len(k.items)):
        if kind.route is not None and len(kind.items) < min_items:
            kind.route = None
            kind.why = f"fewer items than --min-entity-items {min_items}; its rule would be {kind.how}"
        if kind.route is None:
            continue
        words = kind.route.get("equals") or kind.route.get("sort_key_prefix") or kind.route["partition_key_prefix"]
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


# --------------------------------------------------------------------------- attributes


def _propose_entity(kind: _Kind, base: str, decision: KeyDecision) -> ProposedEntity:
    assert kind.route is not None
    stats = attribute_stats(kind.items)
    raw_table = _safe_name(f"{base}_{kind.entity_name}", "raw", MAX_RAW_TABLE_LENGTH)
    entity = ProposedEntity(kind.entity_name, raw_table, kind.route, len(kind.items), kind.how)
    entity.attributes = _propose_attributes(stats, len(kind.items), decision, set())
    return entity


def _share(entities: list[ProposedEntity], all_stats: Mapping[str, AttributeStats], total: int,
           decision: KeyDecision) -> list[ProposedAttribute]:
    """The top-level attributes: the keys, and every attribute each entity holds with the
    same spec, which is also its spec over every sampled item (the unrouted table's items
    included: they land in its columns too). They leave the entities' own lists. An
    attribute only some entities hold stays theirs, so no raw table gets a column that
    is null on every row."""
    everywhere = _propose_attributes(all_stats, total, decision, set())
    holders: dict[str, list[ProposedAttribute]] = {}
    for entity in entities:
        for attribute in entity.attributes:
            holders.setdefault(attribute.name, []).append(attribute)
    key_names = {decision.partition_key, decision.sort_key}
    shared_names = {
        name for name, held in holders.items()
        if name in key_names or (len(held) == len(entities) and held[0].left_out is None
                                 and len({a.spec_identity() for a in held}) == 1)
    }
    everywhere_by_name = {attribute.name: attribute for attribute in everywhere}
    shared_names = {name for name in shared_names
                    if name in key_names or everywhere_by_name[name].spec_identity() == holders[name][0].spec_identity()}
    shared = [attribute for attribute in everywhere if attribute.name in shared_names]
    for entity in entities:
        entity.attributes = [a for a in entity.attributes if a.name not in shared_names]
        _rename_clashes(entity.attributes, {a.column for a in shared})
    return shared


def _propose_attributes(stats: Mapping[str, AttributeStats], total: int, decision: KeyDecision,
                        taken: set[str]) -> list[ProposedAttribute]:
    keys = [name for name in (decision.partition_key, decision.sort_key) if name]
    ordered = keys + [name for name in stats if name not in keys]
    proposed = []
    for name in ordered:
        attribute = _propose(name, stats[name], total, taken, is_key=name in keys)
        if attribute.left_out is None:
            taken.add(attribute.column)
            if attribute.cast is not None:
                taken.add(attribute.column + CAST_TEXT_SUFFIX)
        proposed.append(attribute)
    return proposed


def _leave_out_case_twins(attributes: Iterable[ProposedAttribute]) -> None:
    """DynamoDB tells `Status` from `status`, Spark does not: the loader refuses both in one
    file (or one map), so the later spelling is left out, to land in _extra_attributes."""
    first: dict[str, str] = {}
    for attribute in attributes:
        if attribute.left_out is not None:
            continue
        twin = first.setdefault(attribute.name.casefold(), attribute.name)
        if twin != attribute.name:
            attribute.left_out = (f"differs from {twin!r} only in case, and Spark reads both as one field; "
                                  "it stays in _extra_attributes")
            attribute.undecided.append(f"{attribute.name!r} and {twin!r} differ only in case: keep one of them")
        _leave_out_case_twins(attribute.fields)
        if attribute.items is not None:
            _leave_out_case_twins(attribute.items.fields)


def _propose(name: str, stats: AttributeStats, total: int, taken: set[str], *, is_key: bool = False,
             is_item: bool = False) -> ProposedAttribute:
    column = "" if is_item else _unique_column(_safe_column(name), taken)
    attribute = ProposedAttribute(name, column, None, stats.present, total, dict(stats.types))
    if not is_item and column != snake_case(name):
        attribute.notes.append(f"column {column}: {snake_case(name) or name!r} "
                               f"{_why_renamed(snake_case(name), taken)}")
    if len(stats.types) > 1:
        attribute.left_out = ("seen as " + " and ".join(f"{t} ({n} items)" for t, n in _by_count(stats.types))
                              + ": one column cannot hold both, so it stays in _extra_attributes (declare one type "
                              "by hand if the other is an error: its items are then quarantined as type_mismatch)")
        attribute.undecided.append(attribute.left_out)
        return attribute
    if not stats.types:
        attribute.left_out = f"only ever NULL ({stats.nulls} items): its type is unknown; it stays in _extra_attributes"
        attribute.undecided.append(attribute.left_out)
        return attribute
    attribute.type = next(iter(stats.types))
    if attribute.type == "invalid":
        attribute.left_out = "not DynamoDB JSON (a value without one type descriptor); it stays in _extra_attributes"
        return attribute
    if attribute.type == "M":
        field_taken: set[str] = set()
        attribute.fields = [_propose(field_name, field_stats, stats.maps, field_taken)
                            for field_name, field_stats in stats.fields.items()]
        if not any(f.left_out is None for f in attribute.fields):
            attribute.left_out = "a map with no field of one type seen; it stays in _extra_attributes"
            attribute.undecided.append(attribute.left_out)
            return attribute
    if attribute.type == "L":
        element_stats = stats.items or AttributeStats()
        attribute.items = _propose("items", element_stats, element_stats.present, set(), is_item=True)
        if attribute.items.left_out is not None or attribute.items.type is None:
            why = attribute.items.left_out or "every list seen is empty, so its elements' type is unknown"
            attribute.left_out = f"list elements: {why}"
            attribute.undecided.append(attribute.left_out)
            return attribute
    if not is_key:
        _propose_cast(attribute, stats)
    if not is_item:
        _propose_pii(attribute, stats)
    return attribute


def _propose_cast(attribute: ProposedAttribute, stats: AttributeStats) -> None:
    values = stats.present
    if attribute.type == "S":
        if stats.timestamps == values:
            attribute.cast = "timestamp"
            attribute.notes.append(f"cast timestamp: all {values} values are ISO-8601 date-times")
        elif stats.dates == values:
            attribute.cast = "date"
            attribute.notes.append(f"cast date: all {values} values are ISO-8601 dates")
        elif stats.boolean_texts == values:
            attribute.undecided.append(f"all {values} values are 'true'/'false' text; no cast reads text as boolean, "
                                       "so it stays text")
        elif stats.number_texts == values:
            attribute.undecided.append(f"all {values} values are numbers written as text; casts read numbers from N "
                                       "attributes only, so it stays text")
        elif stats.timestamps or stats.dates:
            attribute.undecided.append(f"{stats.timestamps + stats.dates} of {values} values are ISO-8601 dates or "
                                       "times, the rest are not: no cast proposed")
    elif attribute.type == "N":
        if stats.unparsed_numbers:
            attribute.undecided.append(f"{stats.unparsed_numbers} of {values} values in exponent notation: "
                                       "no cast proposed")
        elif stats.integers == values and not stats.over_bigint:
            attribute.cast = "bigint"
            epoch = ("epoch seconds" if stats.epoch_seconds == values else
                     "epoch milliseconds" if stats.epoch_millis == values else None)
            attribute.notes.append(f"cast bigint: all {values} values are integers"
                                   + (f" (they read as {epoch}: staging keeps the number)" if epoch else ""))
            if epoch:
                attribute.undecided.append(f"the values read as {epoch}; no cast turns them into a timestamp")
        else:
            precision = stats.integer_digits + stats.scale
            if precision > MAX_DECIMAL_PRECISION:
                attribute.undecided.append(f"up to {stats.integer_digits} integer digits and {stats.scale} decimals, "
                                           f"wider than decimal({MAX_DECIMAL_PRECISION}): no cast proposed")
                return
            precision = min(MAX_DECIMAL_PRECISION, max(precision, MIN_DECIMAL_PRECISION))
            attribute.cast = f"decimal({precision},{stats.scale})"
            attribute.notes.append(f"cast {attribute.cast}: at most {stats.integer_digits} integer digits and "
                                   f"{stats.scale} decimals seen; precision {precision} leaves room")


def _propose_pii(attribute: ProposedAttribute, stats: AttributeStats) -> None:
    words = snake_case(attribute.name).split("_")
    joined = "".join(words)
    shapes = [(stats.emails, "e-mail addresses"), (stats.phones, "phone numbers"), (stats.ips, "IP addresses")]
    by_shape = next((what for count, what in shapes if stats.present and count * 2 > stats.present), None)
    by_name = next((word for word in [*words, joined] if word in _PII_WORDS), None)
    if by_name is None and "name" in words and _PERSON_NAME_WORDS & set(words):
        by_name = "a person's name"
    nested = any(f.pii for f in attribute.fields if f.left_out is None)
    if by_shape or by_name or nested:
        attribute.pii = True
        reasons = [f"most values look like {by_shape}" if by_shape else "",
                   f"its name says {by_name!r}" if by_name else "", "a field of it is PII" if nested else ""]
        attribute.notes.append("pii: PROPOSED, confirm: " + "; ".join(r for r in reasons if r))
    elif "name" in words:
        attribute.undecided.append("named like a name: PII when it names a person, not when a product or company")


# --------------------------------------------------------------------------- names


def _table_base_name(table: str) -> str:
    return _safe_name(snake_case(table), "raw", MAX_RAW_TABLE_LENGTH - len(UNROUTED_SUFFIX))


def _safe_name(name: str, prefix: str, max_length: int) -> str:
    """A lower snake_case name that no engine reserves: `<prefix>_<name>` when it does not
    start with a letter, `<name>_value` when reserved (names.py's rule), cut to `max_length`."""
    name = name[:max_length]
    if not SQL_NAME.fullmatch(name):
        name = f"{prefix}_{name}".strip("_")[:max_length]
    if reserved_in(name) or name in MODEL_COLUMNS:
        name = name[: max_length - len("_value")] + "_value"
    return name


def _safe_column(name: str) -> str:
    return _safe_name(snake_case(name), "attr", MAX_COLUMN_LENGTH)


def _unique_column(column: str, taken: set[str]) -> str:
    candidate, number = column, 1
    while candidate in taken:
        number += 1
        candidate = f"{column}_{number}"
    return candidate


def _why_renamed(derived: str, taken: set[str]) -> str:
    if not derived or not SQL_NAME.fullmatch(derived):
        return "is not lower snake_case starting with a letter"
    engines = reserved_in(derived)
    if engines:
        return "is reserved in " + ", ".join(engines)
    if derived in MODEL_COLUMNS:
        return "is a column the dbt models add"
    return "is already another attribute's column"


def _rename_clashes(attributes: list[ProposedAttribute], shared_columns: set[str]) -> None:
    """An entity's own column may not take a shared column's name (say, `GSI1PK` shared and
    `gsi1pk` its own would both be `gsi1_pk`)."""
    taken = set(shared_columns)
    for attribute in attributes:
        if attribute.left_out is None and attribute.column in taken:
            renamed = _unique_column(attribute.column, taken)
            attribute.notes.append(f"column {renamed}: {attribute.column} is already a shared column")
            attribute.column = renamed
        if attribute.left_out is None:
            taken.add(attribute.column)
