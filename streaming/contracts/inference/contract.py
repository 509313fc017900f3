"""`infer_contract`: a table's contract proposal from a sample, and the proposal's parts.

The steps, each in its module: the key (keys.py), the kinds of item and their match
rules (kinds.py), the attributes of each entity and those every entity shares
(attributes.py, and `_share` here), then the partitioning. render.py writes the result
as a contract file and as the report.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming.contracts.inference.attributes import (
    ProposedAttribute,
    leave_out_case_twins,
    propose_attributes,
    rename_clashes,
    safe_name,
    table_base_name,
    types_by_count,
    unique_column,
)
from streaming.contracts.inference.keys import KeyDecision, decide_keys, example_key, with_key
from streaming.contracts.inference.kinds import DEFAULT_MIN_ENTITY_ITEMS, Kind, find_kinds
from streaming.contracts.inference.sample import (
    AttributeStats,
    DynamoItem,
    InferenceError,
    ItemSample,
    attribute_stats,
    personal_shapes,
)
from streaming.contracts.model import UNROUTED_SUFFIX
from streaming.contracts.names import CAST_TEXT_SUFFIX, MAX_RAW_TABLE_LENGTH


# (attribute name, its column, its DynamoDB JSON value) -> what a proposal may show of it.
PiiHider = Callable[[str, str, Any], Any]
# What a PII value shows as without a masker: `quarantine show`'s mask without a PII key
# (`lakehouse contract infer` passes quarantine's masker, which pseudonymises with one).
WITHHELD = "***"


def withhold(name: str, column: str, value: Any) -> Any:
    return WITHHELD


@dataclass
class ProposedEntity:
    name: str
    raw_table: str
    match: dict[str, str]
    items: int
    how: str  # how the kind was found, for its comment
    attributes: list[ProposedAttribute] = field(default_factory=list)
    named: str = ""  # why it has its name, for its comment


@dataclass
class UnroutedKind:
    kind: str
    items: int
    example_key: str
    why: str


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
                + ", ".join(f"{t} {n}x" for t, n in types_by_count(attribute.types))
                for where, attribute in self.attributes_with_owner() if len(attribute.types) > 1]

    def attributes_with_owner(self) -> Iterable[tuple[str, ProposedAttribute]]:
        """Every attribute, nested ones too, with where it sits (`entities.users`)."""
        owners = [("attributes", self.shared)] + [(f"entities.{e.name}", e.attributes) for e in self.entities]
        for where, attributes in owners:
            for attribute in attributes:
                yield from _walk(attribute, where)


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
    hide_pii: PiiHider = withhold,
) -> Proposal:
    """The contract proposal for DynamoDB table `table` from `sample` (module docstring).
    The only sampled values a proposal shows are example keys; `hide_pii` hides those of
    an attribute the proposal flags PII."""
    items = list(sample.items.values())
    if not items:
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(sample.skipped.items()))
        raise InferenceError(f"no item of table {table!r} in the sample ({sample.records_read} records read"
                             + (f": {why}" if why else "") + "); nothing to infer a contract from")
    decision = decide_keys(items, sample, key)
    items = with_key(items, decision, sample)
    all_stats = attribute_stats(items)
    kinds, routing = find_kinds(items, decision, all_stats, min_entity_items)
    base = table_base_name(table)
    routed = [kind for kind in kinds if kind.route is not None]
    if not routed or (len(routed) == 1 and len(kinds) == 1):
        if kinds:
            routing += (f"; {len(kinds)} kind(s) found but fewer than two routable, so one raw table holds "
                        "every item: " + "; ".join(f"{k.name} ({len(k.items)} items)" for k in kinds))
        images = sample.images_of(items)
        shared = propose_attributes(attribute_stats(images), len(images), decision, set())
        raw_table = safe_name(base, "raw", MAX_RAW_TABLE_LENGTH)
        return _finish(table, raw_table, None, decision, routing, shared, [], [], items, sample)
    entities = [_propose_entity(kind, base, decision, sample) for kind in routed]
    images = sample.images_of(items)
    shared = _share(entities, attribute_stats(images), len(images), decision)
    # An example key is shown only once the keys' PII flags are known. A key flagged PII,
    # or a value holding an e-mail address, phone number or IP address whatever its key's
    # flag, shows as `hide_pii` gives it (withheld by default).
    columns = {attribute.name: attribute.column for attribute in shared}
    pii = {attribute.name for attribute in shared if attribute.pii}

    def shown(name: str, value: Any) -> Any:
        text = value.get("S") if isinstance(value, dict) else None
        if name in pii or (isinstance(text, str) and personal_shapes(text)):
            return hide_pii(name, columns.get(name, name), value)
        return value

    unrouted = [UnroutedKind(kind.name, len(kind.items), example_key(kind.items[0], decision, shown), kind.why)
                for kind in kinds if kind.route is None]
    unrouted_table = safe_name(base + UNROUTED_SUFFIX, "raw", MAX_RAW_TABLE_LENGTH)
    return _finish(table, None, unrouted_table, decision, routing, shared, entities, unrouted, items, sample)


def _finish(table: str, raw_table: str | None, unrouted_table: str | None, decision: KeyDecision, routing: str,
            shared: list[ProposedAttribute], entities: list[ProposedEntity], unrouted: list[UnroutedKind],
            items: list[DynamoItem], sample: ItemSample) -> Proposal:
    leave_out_case_twins([*shared, *(a for entity in entities for a in entity.attributes)])
    key_column = next(a.column for a in shared if a.name == decision.partition_key)
    columns = [*shared, *(a for entity in entities for a in entity.attributes)]
    # A cast's column keeps its text beside it as `<column>_text`: that name is taken too.
    taken = {a.column for a in columns} | {a.column + CAST_TEXT_SUFFIX for a in columns if a.cast}
    partition_column = unique_column(f"{key_column}_suffix", taken)
    text = f"hex({key_column})" if decision.types[decision.partition_key] == "B" else key_column
    return Proposal(table, raw_table, unrouted_table, decision, routing, shared, entities, unrouted,
                    partition_column, f"substring({text}, -1, 1)", len(items), sample)


def _propose_entity(kind: Kind, base: str, decision: KeyDecision, sample: ItemSample) -> ProposedEntity:
    """Typed from every image of the kind's items: an attribute an item has lost since is
    typed too."""
    assert kind.route is not None
    images = sample.images_of(kind.items)
    stats = attribute_stats(images)
    raw_table = safe_name(f"{base}_{kind.entity_name}", "raw", MAX_RAW_TABLE_LENGTH)
    entity = ProposedEntity(kind.entity_name, raw_table, kind.route, len(kind.items), kind.how, named=kind.named)
    entity.attributes = propose_attributes(stats, len(images), decision, set())
    return entity


def _share(entities: list[ProposedEntity], all_stats: Mapping[str, AttributeStats], total: int,
           decision: KeyDecision) -> list[ProposedAttribute]:
    """The top-level attributes: the keys, and every attribute each entity holds with the
    same spec, which is also its spec over every sampled item (the unrouted table's items
    included: they land in its columns too). They leave the entities' own lists. An
    attribute only some entities hold stays theirs, so no raw table gets a column that
    is null on every row."""
    everywhere = propose_attributes(all_stats, total, decision, set())
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
        rename_clashes(entity.attributes, {a.column for a in shared})
    return shared
