"""The proposal for each attribute: its type, column, cast and PII flag, or why it is left out.

An attribute seen with two types, only as NULL, or as a list of elements of mixed types,
is left out: it lands in `_extra_attributes`, where no value is quarantined. A cast is
proposed only when every sampled value fits it; PII from the attribute's name and its
values' shapes, always as a proposal. Columns follow the naming rules of names.py:
`<column>_value` for a reserved word or a column the dbt models add, `attr_<column>`
for one that does not start with a letter, a number for a clash.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.contracts.inference.keys import KeyDecision
from streaming.contracts.inference.sample import DESCRIPTOR_RULES, AttributeStats
from streaming.contracts.loader import snake_case
from streaming.contracts.model import ATTRIBUTE_TYPES, MAX_DECIMAL_PRECISION, MAX_NESTING_DEPTH, UNROUTED_SUFFIX
from streaming.contracts.names import (
    CAST_TEXT_SUFFIX,
    MAX_COLUMN_LENGTH,
    MAX_RAW_TABLE_LENGTH,
    MODEL_COLUMNS,
    SQL_NAME,
    reserved_in,
    without_accents,
)

# A decimal cast leaves room above the digits seen: 18 is the precision of the packaged
# contracts' amounts, and a value wider than its cast becomes null in staging.
MIN_DECIMAL_PRECISION = 18
# Words of an attribute name that mark personal data; `name` alone is left undecided
# (a product or a company has one too).
_PII_WORDS = frozenset({"email", "mail", "phone", "mobile", "telephone", "msisdn", "address", "street", "postcode",
                        "zip", "zipcode", "ip", "birthday", "birthdate", "dob", "ssn", "passport", "iban",
                        "firstname", "lastname", "surname", "fullname"})
# Why a map or list is left out for its depth (model.MAX_NESTING_DEPTH); a map or list
# holding only such values says the same.
_TOO_DEEP = f"deeper than the raw tables' readers follow ({MAX_NESTING_DEPTH} levels of maps and lists)"
_PERSON_NAME_WORDS = frozenset({"first", "last", "full", "given", "family", "middle", "cust", "customer", "user",
                                "contact", "person", "display", "maiden", "nick", "legal", "real", "owner", "holder",
                                "author", "member", "employee", "recipient", "sender", "billing", "shipping",
                                "guest", "patient", "student", "driver", "passenger", "spouse", "parent", "guardian"})


@dataclass
class ProposedAttribute:
    """One attribute of the proposal, or one left out of it (`left_out` says why)."""

    name: str
    column: str
    type: str | None
    seen: int  # items holding a value other than NULL
    of: int  # items it could be on
    types: dict[str, int]
    nulls: int = 0  # NULL values (of a list's elements: NULL elements)
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


def types_by_count(types: Mapping[str, int]) -> list[tuple[str, int]]:
    """Types seen, the most frequent first, ties in name order: the same text on every run."""
    return sorted(types.items(), key=lambda seen: (-seen[1], seen[0]))


def propose_attributes(stats: Mapping[str, AttributeStats], total: int, decision: KeyDecision,
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


def leave_out_case_twins(attributes: Iterable[ProposedAttribute]) -> None:
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
        leave_out_case_twins(attribute.fields)
        if attribute.items is not None:
            leave_out_case_twins(attribute.items.fields)


def _propose(name: str, stats: AttributeStats, total: int, taken: set[str], *, is_key: bool = False,
             is_item: bool = False, unit: str = "items", depth: int = 1, in_list: bool = False) -> ProposedAttribute:
    """`unit` names what `total` counts, for the notes: items, maps (of a map's field).
    `depth`: the M and L levels this value would nest at, counted as model.nesting_depth does.
    `in_list`: a list's elements, or a field inside them, which get no cast (_drop_cast_in_list)."""
    unit = "elements" if is_item else unit
    column = "" if is_item else unique_column(_safe_column(name), taken)
    attribute = ProposedAttribute(name, column, None, stats.present, total, dict(stats.types), nulls=stats.nulls)
    derived = snake_case(without_accents(name))
    if not is_item and derived != snake_case(name):
        attribute.notes.append(f"column {column}: {name!r} without its accents")
    if not is_item and column != derived:
        attribute.notes.append(f"column {column}: {derived or name!r} {_why_renamed(derived, taken)}")
    if len(stats.types) > 1:
        attribute.left_out = ("seen as " + " and ".join(f"{t} ({n} {unit})" for t, n in types_by_count(stats.types))
                              + ": one column cannot hold both, so it stays in _extra_attributes (declare one type "
                              "by hand if the other is an error: its items are then quarantined as type_mismatch)")
        attribute.undecided.append(attribute.left_out)
        return attribute
    if not stats.types:
        attribute.left_out = f"only ever NULL ({stats.nulls} items): its type is unknown; it stays in _extra_attributes"
        attribute.undecided.append(attribute.left_out)
        return attribute
    attribute.type = next(iter(stats.types))
    if attribute.type not in ATTRIBUTE_TYPES:
        attribute.left_out = (f"not DynamoDB JSON (type descriptor {attribute.type!r}); the stream quarantines such "
                              "items, so the contract leaves it out")
        attribute.undecided.append(attribute.left_out)
        return attribute
    if attribute.type in ("M", "L") and depth > MAX_NESTING_DEPTH:
        # The loader refuses it: hudi-rs cannot read a table schema nested deeper.
        attribute.left_out = (f"a {attribute.type} nested {depth} levels deep, {_TOO_DEEP}; "
                              "it stays in _extra_attributes")
        attribute.undecided.append(attribute.left_out)
        return attribute
    if attribute.type == "M":
        field_taken: set[str] = set()
        attribute.fields = [_propose(field_name, field_stats, stats.maps, field_taken, unit="maps", depth=depth + 1,
                                     in_list=in_list)
                            for field_name, field_stats in stats.fields.items()]
        if not any(f.left_out is None for f in attribute.fields):
            too_deep = any(_TOO_DEEP in (f.left_out or "") for f in attribute.fields)
            attribute.left_out = (f"a map whose fields nest {_TOO_DEEP}" if too_deep
                                  else "a map with no field of one type seen") + "; it stays in _extra_attributes"
            attribute.undecided.append(attribute.left_out)
            return attribute
    if attribute.type == "L":
        element_stats = stats.items or AttributeStats()
        attribute.items = _propose("items", element_stats, element_stats.present, set(), is_item=True,
                                   depth=depth + 1, in_list=True)
        if attribute.items.left_out is not None or attribute.items.type is None:
            why = attribute.items.left_out or "every list seen is empty, so its elements' type is unknown"
            attribute.left_out = f"list elements: {why}"
            attribute.undecided.append(attribute.left_out)
            # The list's point says it: the elements' own would be the same point twice.
            attribute.items.undecided.clear()
            return attribute
    if stats.malformed:
        # Typed by its descriptor, as the stream reads it; its casts are not proposed from
        # values that are not what the descriptor says.
        attribute.undecided.append(
            f"{stats.malformed} of {stats.present} {unit if is_item else 'values'} are not DynamoDB JSON: type "
            f"{attribute.type} holds {DESCRIPTOR_RULES[attribute.type]}; the stream may read such a value as text "
            "or quarantine its item: check the source (no cast proposed)")
    elif not is_key or attribute.type == "N":
        # A number key is cast too: staging types it exactly and keeps its text in
        # <key>_text, which the merge matches on. A text key names items: it stays text.
        _propose_cast(attribute, stats, unit if is_item else "values")
        if in_list:
            _drop_cast_in_list(attribute)
    if not is_item:
        _propose_pii(attribute, stats)
    return attribute


def _drop_cast_in_list(attribute: ProposedAttribute) -> None:
    """Staging keeps a list as raw has it, so a cast inside one would be typed and checked by
    no model scaffold writes (a map field's cast gets a staging column of its own): the
    proposal says which cast fits, for a model that unnests the list to add."""
    if attribute.cast is None:
        return
    fits = f"cast {attribute.cast}"
    attribute.notes = [f"no cast: {note.removeprefix(fits + ': ')} ({attribute.cast} would fit); staging keeps a list "
                       "as raw has it, so add the cast when a model of yours unnests the list (typed_by_contract with "
                       "the element's path)" if note.startswith(fits) else note for note in attribute.notes]
    attribute.cast = None


def _propose_cast(attribute: ProposedAttribute, stats: AttributeStats, unit: str) -> None:
    """`unit`: what the values are, `values` or a list's `elements` (NULL ones aside)."""
    values = stats.present
    noun = unit.removesuffix("s")
    counted = f"{values} {noun if values == 1 else unit}" + (
        f", {stats.nulls} NULL aside" if unit == "elements" and stats.nulls else "")
    if attribute.type == "S":
        if stats.timestamps == values:
            attribute.cast = "timestamp"
            attribute.notes.append(f"cast timestamp: each {noun} seen is an ISO-8601 date-time ({counted})")
            if 0 < stats.zoned_timestamps < values:
                attribute.undecided.append(
                    f"{stats.zoned_timestamps} of {values} date-times carry a zone (Z or an offset), the rest none: "
                    "the cast reads a time without one in the engine's session time zone, not the writer's; "
                    "check which zone those are in")
        elif stats.dates == values:
            attribute.cast = "date"
            attribute.notes.append(f"cast date: each {noun} seen is an ISO-8601 date ({counted})")
        elif stats.boolean_texts == values:
            attribute.undecided.append(f"each {noun} seen is 'true'/'false' text ({counted}); no cast reads text as "
                                       "boolean, so it stays text")
        elif stats.number_texts == values:
            attribute.undecided.append(f"numbers written as text, each {noun} seen ({counted}); casts read numbers "
                                       "from N attributes only, so it stays text")
        elif stats.timestamps or stats.dates:
            attribute.undecided.append(f"{stats.timestamps + stats.dates} of {values} {unit} are ISO-8601 dates or "
                                       "times, the rest are not: no cast proposed")
    elif attribute.type == "N":
        if stats.unparsed_numbers:
            attribute.undecided.append(f"{stats.unparsed_numbers} of {values} {unit} in exponent notation: "
                                       "no cast proposed")
        elif stats.integers == values and not stats.over_bigint:
            attribute.cast = "bigint"
            epoch = ("epoch seconds" if stats.epoch_seconds == values else
                     "epoch milliseconds" if stats.epoch_millis == values else None)
            attribute.notes.append(f"cast bigint: each {noun} seen is an integer ({counted})"
                                   + (f" (they read as {epoch}: staging keeps the number)" if epoch else ""))
            if epoch:
                attribute.undecided.append(f"the {unit} read as {epoch}; no cast turns them into a timestamp")
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
    elif words == ["name"]:
        # A bare `name`: whose, only its values can tell. A name that says whose it is
        # (`vendorName`, `forumName`, `fileName`) is that thing's, a person's ones are above.
        if stats.present and stats.person_names * 2 > stats.present:
            attribute.undecided.append("named like a name, and most values are written like people's names: "
                                       "PII when it names a person, not when a product or company")
        else:
            attribute.notes.append("not proposed as PII: most values are not written like people's names "
                                   "(they hold digits, inner capitals or a company form)")


# --------------------------------------------------------------------------- names


def table_base_name(table: str) -> str:
    return safe_name(snake_case(table), "raw", MAX_RAW_TABLE_LENGTH - len(UNROUTED_SUFFIX))


def safe_name(name: str, prefix: str, max_length: int) -> str:
    """A lower snake_case name that no engine reserves: `<prefix>_<name>` when it does not
    start with a letter, `<name>_value` when reserved (names.py's rule), cut to `max_length`."""
    name = name[:max_length]
    if not SQL_NAME.fullmatch(name):
        name = f"{prefix}_{name}".strip("_")[:max_length]
    if reserved_in(name) or name in MODEL_COLUMNS:
        name = name[: max_length - len("_value")] + "_value"
    return name


def _safe_column(name: str) -> str:
    return safe_name(snake_case(without_accents(name)), "attr", MAX_COLUMN_LENGTH)


def unique_column(column: str, taken: set[str]) -> str:
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


def rename_clashes(attributes: list[ProposedAttribute], shared_columns: set[str]) -> None:
    """An entity's own column may not take a shared column's name (say, `GSI1PK` shared and
    `gsi1pk` its own would both be `gsi1_pk`)."""
    taken = set(shared_columns)
    for attribute in attributes:
        if attribute.left_out is None and attribute.column in taken:
            renamed = unique_column(attribute.column, taken)
            attribute.notes.append(f"column {renamed}: {attribute.column} is already a shared column")
            attribute.column = renamed
        if attribute.left_out is None:
            taken.add(attribute.column)
