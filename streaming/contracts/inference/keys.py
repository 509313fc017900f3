"""Which attributes are the table's key, and their types.

DynamoDB change records and incremental exports carry `Keys`, but not which of its two
attributes is the partition key: names like `pk`/`sk` decide, else the one with fewer
distinct values, since many items share a partition. A full export and plain items
carry none: the key is given (`--key`), declared by the sample (a NoSQL Workbench
model), or found by such names.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streaming.contracts.inference.sample import DynamoItem, InferenceError, ItemSample
from streaming.contracts.model import KEY_TYPES

_KEY_HINTS = (re.compile(r"(pk|partition_?key|hash_?key)", re.I), re.compile(r"(sk|sort_?key|range_?key)", re.I))


@dataclass
class KeyDecision:
    partition_key: str
    sort_key: str | None
    types: dict[str, str]
    how: str


def decide_keys(items: list[DynamoItem], sample: ItemSample, given: Sequence[str] | None) -> KeyDecision:
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


def with_key(items: list[DynamoItem], decision: KeyDecision, sample: ItemSample) -> list[DynamoItem]:
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


def example_key(item: DynamoItem, decision: KeyDecision,
                shown: Callable[[str, Any], Any] = lambda name, value: value) -> str:
    """`pk=USER#1, sk=PROFILE`, each value as `shown(name, value)` gives it: a PII-flagged
    key's value hidden (a pseudonym is shown whole, a clear value cut to 60 characters)."""
    names = [decision.partition_key] + ([decision.sort_key] if decision.sort_key else [])
    texts = []
    for name in names:
        value = item.get(name)
        shown_value = shown(name, value)
        text = _text_of(shown_value)
        texts.append(f"{name}={text if shown_value is not value or len(text) <= 60 else text[:57] + '...'}")
    return ", ".join(texts)


def _text_of(value: Any) -> str:
    return str(next(iter(value.values())) if isinstance(value, dict) and value else value)
