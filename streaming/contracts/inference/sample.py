"""The sample inference reads, and what it sees of each attribute.

`ItemSample` holds at most `max_items` distinct items, fed by the readers of
streaming/io/item_samples.py; `AttributeStats` counts, for one attribute, map field or
list's elements, its types and the shapes of its values (ISO-8601 times, numbers with
their digits, e-mail addresses, ...) that the proposals of attributes.py are made from.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from streaming.contracts.types import DYNAMODB_TYPES
from streaming.errors import OperatorError

DynamoItem = dict[str, dict[str, Any]]

DEFAULT_MAX_ITEMS = 10_000
# More kinds than this from one attribute means it is not a discriminator (an id, a name);
# a text attribute's distinct values are counted up to it.
MAX_KINDS = 64
# The text forms the dbt casts read (macros/cross_db/types.sql): ISO-8601 date-times with
# seconds, and calendar dates.
_ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DECIMAL_TEXT = re.compile(r"-?(\d+)(?:\.(\d+))?")
_BOOLEAN_TEXTS = frozenset({"true", "false"})
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
# A phone number of 7 to 15 digits (E.164's most), written as people write them: E.164
# (`+14155552671`), or groups of 2 to 8 digits apart by one separator, after an optional
# country code and area code (`+44 20 7946 0000`, `(415) 555-2671`, `020 7946 0000`).
# A plain numeric id has no + and no separator, so it is not one; nor are codes with a
# one-digit group or a group of 9 or more, as ISBNs (`978-3-16-148410-0`,
# `111-1111111111`) and UPC/EAN codes (`0 12345 67890 5`) are written.
_PHONE = re.compile(r"\+[1-9][0-9]{6,14}"
                    r"|(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{1,5}\)[ .-]?)?[0-9]{2,8}(?:[ .-][0-9]{2,8})+")
# What the content of each type descriptor must be in DynamoDB JSON, as inference says it
# (each type's `well_formed` checks it).
DESCRIPTOR_RULES = {code: descriptor_type.content for code, descriptor_type in DYNAMODB_TYPES.items()}
# A person's name as most are written: one to four words of letters, each lower case
# after its first letter (`Ana`, `Mary-Jane O'Neil`, `J. Smith`, `ana lima`). A product, forum or
# company name often has digits, inner capitals or a company form (`Amazon DynamoDB`,
# `Amazon S3`, `Acme Corp`).
_NAME_WORD = r"[A-Za-z][a-z]*(?:['-][A-Za-z][a-z]+)*\.?"
_PERSON_NAME = re.compile(rf"{_NAME_WORD}(?: {_NAME_WORD}){{0,3}}")
_COMPANY_FORMS = frozenset({"inc", "ltd", "llc", "llp", "plc", "corp", "corporation", "company", "co", "gmbh", "ag",
                            "sa", "sarl", "bv", "nv", "oy", "ab", "as", "group", "holdings", "limited"})
BIGINT_MAX = 2**63 - 1
# Integers in these ranges read as epoch times between 2000 and 2100.
_EPOCH_SECONDS = (946_684_800, 4_102_444_800)
_EPOCH_MILLIS = (_EPOCH_SECONDS[0] * 1000, _EPOCH_SECONDS[1] * 1000)


class InferenceError(OperatorError, ValueError):
    """The sample cannot give a contract: no items, no key, or keys that disagree."""


# --------------------------------------------------------------------------- the sample


@dataclass
class ItemSample:
    """The items inference reads: at most `max_items` distinct items, the last image of
    each (a change record's NewImage, or its OldImage for a REMOVE), in reading order.

    Every distinct image of those items is kept too (an OldImage, an image a later record
    replaced), up to `max_items` besides the last ones: attributes are typed from all of
    them, so one an item has since lost is typed as well. Keys and kinds are decided on
    the last images."""

    max_items: int = DEFAULT_MAX_ITEMS
    items: dict[str, DynamoItem] = field(default_factory=dict)
    # identity -> image digest -> image: each item's distinct earlier images.
    earlier: dict[str, dict[str, DynamoItem]] = field(default_factory=dict)
    earlier_images: int = 0
    # Earlier images read past the bound above, not typed.
    earlier_left_out: int = 0
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

    def add(self, image: DynamoItem, keys: Mapping[str, Any] | None = None,
            earlier: DynamoItem | None = None) -> None:
        """One record's item image, and the image it replaced when the record has one (a
        MODIFY's OldImage); `keys` is the record's `Keys` when it has them. A key seen
        again gets this image as its last; a new key past `max_items` stops the sample."""
        self.records_read += 1
        if keys:
            self.key_names[tuple(sorted(keys))] += 1
        identity = json.dumps(keys if keys else image, sort_keys=True)
        if identity not in self.items and self.full:
            self.stopped_early = True
            return
        digest = _digest(image)
        kept = self.earlier.setdefault(identity, {})
        for replaced in (self.items.get(identity), earlier):
            if replaced is not None:
                self._keep_earlier(kept, replaced, digest)
        # The last image is typed as such, not as an earlier one too.
        if kept.pop(digest, None) is not None:
            self.earlier_images -= 1
        self.items[identity] = image

    def _keep_earlier(self, kept: dict[str, DynamoItem], image: DynamoItem, last_digest: str) -> None:
        digest = _digest(image)
        if digest == last_digest or digest in kept:
            return
        if self.earlier_images >= self.max_items:
            self.earlier_left_out += 1
            return
        kept[digest] = image
        self.earlier_images += 1

    def images_of(self, items: Iterable[DynamoItem]) -> list[DynamoItem]:
        """Every distinct image read of the sampled `items` (their last images)."""
        identity_of = {id(image): identity for identity, image in self.items.items()}
        images = []
        for item in items:
            images.append(item)
            if id(item) in identity_of:
                images.extend(self.earlier.get(identity_of[id(item)], {}).values())
        return images

    def skip(self, reason: str) -> None:
        self.records_read += 1
        self.skipped[reason] += 1


def _digest(image: DynamoItem) -> str:
    return hashlib.sha256(json.dumps(image, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- statistics


@dataclass
class AttributeStats:
    """What the sample shows of one attribute (or a map's field, or a list's elements)."""

    present: int = 0  # values other than NULL
    nulls: int = 0
    types: Counter[str] = field(default_factory=Counter)
    # Values whose content is not DynamoDB JSON for their descriptor (`{"N": 5}`, `{"BOOL": "yes"}`).
    malformed: int = 0
    # S values: how many have each shape (a cast fits when all of them do).
    timestamps: int = 0
    zoned_timestamps: int = 0  # with `Z` or an offset
    dates: int = 0
    boolean_texts: int = 0
    number_texts: int = 0
    emails: int = 0
    phones: int = 0
    ips: int = 0
    person_names: int = 0
    # N values: how many are integers (and in an epoch range), the widest integer part and scale.
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
        if kind in DYNAMODB_TYPES and not DYNAMODB_TYPES[kind].well_formed(content):
            self.malformed += 1
            return
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
        timestamp = _ISO_TIMESTAMP.fullmatch(text)
        if timestamp and _valid_datetime(text):
            self.timestamps += 1
            self.zoned_timestamps += timestamp.group(2) is not None
        if _ISO_DATE.fullmatch(text) and _valid_date(text):
            self.dates += 1
        if text.lower() in _BOOLEAN_TEXTS:
            self.boolean_texts += 1
        if _DECIMAL_TEXT.fullmatch(text):
            self.number_texts += 1
        shapes = personal_shapes(text)
        self.emails += "e-mail address" in shapes
        self.phones += "phone number" in shapes
        self.ips += "IP address" in shapes
        if _PERSON_NAME.fullmatch(text) and not _COMPANY_FORMS & set(text.lower().split()):
            self.person_names += 1

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


def personal_shapes(text: str) -> set[str]:
    """The shapes of personal data `text` holds, whole or as a segment of a key
    (`USER#ana@example.com`): e-mail address, phone number, IP address."""
    shapes = set()
    for part in {text, *text.split("#")}:
        if _EMAIL.fullmatch(part):
            shapes.add("e-mail address")
        if _is_ip(part):
            shapes.add("IP address")
        elif _is_phone(part):
            shapes.add("phone number")
    return shapes


def _is_phone(text: str) -> bool:
    # A date, a time or a decimal number can have a phone number's digits and separators.
    return bool(_PHONE.fullmatch(text) and 7 <= sum(char.isdigit() for char in text) <= 15
                and not _ISO_TIMESTAMP.fullmatch(text) and not _ISO_DATE.fullmatch(text)
                and not _DECIMAL_TEXT.fullmatch(text))


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
