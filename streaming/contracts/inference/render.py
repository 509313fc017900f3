"""An inferred contract (contract.py) as a contract file with its reasons, and as a report.

The file is the YAML the loader reads, written line by line so that every decision the
inference made sits beside it as a comment, and every point left to a person says
`REVIEW`. The report holds the same facts as data: items per entity, coverage,
conflicts, undecided points and the derived column names.
"""
from __future__ import annotations

import json
import re
from typing import Any

from streaming.contracts.inference.attributes import ProposedAttribute
from streaming.contracts.inference.contract import Proposal, ProposedEntity
from streaming.contracts.inference.sample import ItemSample
from streaming.contracts.loader import snake_case

# A mapping key or value YAML reads back as the same text when written bare: a word that
# is none of YAML 1.1's booleans or nulls (PyYAML reads `on` and `no` as booleans).
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"})
INDENT = "  "


def _scalar(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    # A JSON string is a YAML double-quoted scalar.
    return json.dumps(text, ensure_ascii=False)


def _description(text: str) -> str:
    """Descriptions reach dbt's YAML, which dbt renders as Jinja (names.py): a discriminator
    value holding `{{` must not make the proposal one the loader refuses."""
    return _scalar(text.replace("{", "("))


def _comment(text: str, depth: int) -> list[str]:
    return [f"{INDENT * depth}# {line}" for line in text.splitlines()]


def render_contract(proposal: Proposal) -> str:
    sample = proposal.sample
    stopped = (f"stopped at --max-items {sample.max_items}: a larger sample may show more kinds and types"
               if sample.stopped_early else f"every record read (--max-items {sample.max_items} not reached)")
    lines = _comment(
        f"Proposed by `lakehouse contract infer` from {proposal.items} items{_earlier_images(sample)} "
        f"({sample.records_read} records read; {stopped}).\n"
        "Every decision is explained in a comment; REVIEW marks what a person has to decide, and every\n"
        "`pii: true` is a proposal to confirm. Then `lakehouse scaffold --table` and `lakehouse stream`.", 0)
    lines.append(f"table: {_scalar(proposal.table)}")
    lines.append(f"description: {_description(_table_description(proposal))}")
    lines += _comment(f"key: {proposal.key.how}", 0)
    lines.append("key:")
    lines.append(f"{INDENT}partition_key: {_scalar(proposal.key.partition_key)}")
    if proposal.key.sort_key:
        lines.append(f"{INDENT}sort_key: {_scalar(proposal.key.sort_key)}")
    if proposal.raw_table is not None:
        lines.append(f"raw_table: {proposal.raw_table}")
        lines += _comment(f"one raw table: {proposal.routing}", 0)
    else:
        lines += _comment("shared by every entity and the unrouted table: the keys, and what every entity "
                          "holds alike", 0)
    lines.append("attributes:")
    for attribute in proposal.shared:
        lines += _attribute(attribute, 1)
    lines += _comment("the last character of the partition key: a key never changes partition. Change it before "
                      "the first stream; later it takes `lakehouse reprocess`.", 0)
    lines.append("partitioning:")
    lines.append(f"{INDENT}column: {proposal.partition_column}")
    lines.append(f"{INDENT}expression: {_scalar(proposal.partition_expression)}")
    if proposal.unrouted_table is not None:
        lines.append(f"unrouted_table: {proposal.unrouted_table}")
        for kind in proposal.unrouted:
            lines += _comment(f"REVIEW: unrouted kind {kind.kind}: {kind.items} item(s), e.g. {kind.example_key}; "
                              f"{kind.why}", 0)
        lines += _comment(f"entities {proposal.routing}", 0)
        lines.append("entities:")
        for entity in proposal.entities:
            lines += _entity(entity)
    return "\n".join(lines) + "\n"


def _earlier_images(sample: ItemSample) -> str:
    """The earlier images typed besides the items' last ones, and those left out."""
    text = f" and {sample.earlier_images} earlier image(s) of them" if sample.earlier_images else ""
    if sample.earlier_left_out:
        text += f" ({sample.earlier_left_out} more earlier image(s) past --max-items not typed)"
    return text


def _table_description(proposal: Proposal) -> str:
    shape = (f"{len(proposal.entities)} entities and {len(proposal.unrouted)} unrouted kind(s)"
             if proposal.entities else "one kind of item")
    return f"TODO describe. Inferred from {proposal.items} sampled items: {shape}."


def _entity(entity: ProposedEntity) -> list[str]:
    named = f"; {entity.named}" if entity.named else ""
    lines = _comment(f"{entity.items} sampled items; {entity.how}{named}", 1)
    lines.append(f"{INDENT}{entity.name}:")
    lines.append(f"{INDENT * 2}raw_table: {entity.raw_table}")
    lines.append(f"{INDENT * 2}description: {_description(f'TODO describe. {entity.items} sampled items, {entity.how}.')}")
    lines.append(f"{INDENT * 2}match:")
    for field, value in entity.match.items():
        lines.append(f"{INDENT * 3}{field}: {_scalar(value)}")
    if any(attribute.left_out is None for attribute in entity.attributes):
        lines.append(f"{INDENT * 2}attributes:")
    for attribute in entity.attributes:
        lines += _attribute(attribute, 3)
    return lines


def _attribute(attribute: ProposedAttribute, depth: int, *, is_item: bool = False, in_map: bool = False) -> list[str]:
    pad = INDENT * depth
    if attribute.left_out is not None:
        return _comment(f"REVIEW: {attribute.name} left out: {attribute.left_out}", depth)
    lines = [line for note in attribute.notes for line in _comment(note, depth)]
    lines += [line for point in attribute.undecided for line in _comment(f"REVIEW: {point}", depth)]
    inner = pad + INDENT
    if is_item:
        lines.append(f"{pad}items:")
    else:
        lines.append(f"{pad}{_scalar(attribute.name)}:")
        lines.append(f"{inner}column: {attribute.column}")
    assert attribute.type is not None
    lines.append(f"{inner}type: {attribute.type}")
    if attribute.cast:
        lines.append(f"{inner}cast: {_scalar(attribute.cast)}")
    if attribute.pii:
        lines.append(f"{inner}pii: true")
    lines.append(f"{inner}description: {_description(_attribute_description(attribute, is_item, in_map))}")
    if attribute.items is not None:
        lines += _attribute(attribute.items, depth + 1, is_item=True)
    if attribute.fields:
        lines.append(f"{inner}fields:")
        for field in attribute.fields:
            lines += _attribute(field, depth + 2, in_map=True)
    return lines


def _attribute_description(attribute: ProposedAttribute, is_item: bool, in_map: bool) -> str:
    if is_item:
        return f"TODO describe. {attribute.seen} elements seen, type {attribute.type}."
    return (f"TODO describe. On {attribute.seen} of {attribute.of} sampled {'maps' if in_map else 'item images'} "
            f"({attribute.coverage:.0%}), type {attribute.type}.")


# --------------------------------------------------------------------------- the report


def report(proposal: Proposal) -> dict[str, Any]:
    """The facts behind the proposal, as JSON-ready data (`--report FILE`)."""
    sample = proposal.sample
    return {
        "table": proposal.table,
        "sample": {"items": proposal.items, "records_read": sample.records_read, "max_items": sample.max_items,
                   "stopped_at_max_items": sample.stopped_early, "skipped": dict(sample.skipped),
                   "earlier_images": sample.earlier_images, "earlier_images_left_out": sample.earlier_left_out},
        "key": {"partition_key": proposal.key.partition_key, "sort_key": proposal.key.sort_key,
                "types": proposal.key.types, "how": proposal.key.how},
        "routing": proposal.routing,
        "raw_table": proposal.raw_table,
        "unrouted_table": proposal.unrouted_table,
        "shared_attributes": [_attribute_report(a) for a in proposal.shared],
        "entities": [
            {"name": e.name, "raw_table": e.raw_table, "match": e.match, "items": e.items,
             "attributes": [_attribute_report(a) for a in e.attributes]}
            for e in proposal.entities
        ],
        "unrouted_kinds": [{"kind": k.kind, "items": k.items, "example_key": k.example_key, "why": k.why}
                           for k in proposal.unrouted],
        "conflicts": proposal.conflicts,
        "undecided": proposal.undecided,
        "columns": columns(proposal),
    }


def _attribute_report(attribute: ProposedAttribute) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": attribute.name, "column": attribute.column or None, "type": attribute.type,
        "types_seen": attribute.types, "items": attribute.seen, "of": attribute.of,
        "coverage": round(attribute.coverage, 4), "cast": attribute.cast, "pii_proposed": attribute.pii,
        "left_out": attribute.left_out,
    }
    if attribute.items is not None:
        entry["items_spec"] = _attribute_report(attribute.items)
    if attribute.fields:
        entry["fields"] = [_attribute_report(field) for field in attribute.fields]
    return entry


def columns(proposal: Proposal) -> dict[str, dict[str, str]]:
    """Raw table -> attribute name -> its column, for each raw table the proposal makes."""
    shared = {a.name: a.column for a in proposal.shared if a.left_out is None}
    if proposal.raw_table is not None:
        return {proposal.raw_table: shared}
    tables = {e.raw_table: {**shared, **{a.name: a.column for a in e.attributes if a.left_out is None}}
              for e in proposal.entities}
    assert proposal.unrouted_table is not None
    tables[proposal.unrouted_table] = shared
    return tables


def summary_lines(proposal: Proposal) -> list[str]:
    """The terminal report: what was read, what each raw table gets, what to review."""
    sample = proposal.sample
    lines = [f"table {proposal.table}: {proposal.items} items{_earlier_images(sample)} from {sample.records_read} "
             "records"
             + (f" (stopped at --max-items {sample.max_items})" if sample.stopped_early else "")]
    if sample.skipped:
        lines.append("  records skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(sample.skipped.items())))
    lines.append(f"  key: {proposal.key.partition_key}"
                 + (f", {proposal.key.sort_key}" if proposal.key.sort_key else "") + f" ({proposal.key.how})")
    lines.append(f"  routing: {proposal.routing}")
    for raw_table, names in columns(proposal).items():
        entity = next((e for e in proposal.entities if e.raw_table == raw_table), None)
        count = (f"{entity.items} items" if entity else
                 f"{sum(k.items for k in proposal.unrouted)} items" if raw_table == proposal.unrouted_table
                 else f"{proposal.items} items")
        # Only the columns named apart from the plain derivation (a reserved word, a clash):
        # the report file lists them all.
        renamed = [f"{name} -> {column}" for name, column in names.items() if column != snake_case(name)]
        lines.append(f"  {raw_table}: {count}, {len(names)} columns"
                     + (f"; named apart: {', '.join(renamed)}" if renamed else ""))
    pii = [f"{where}.{a.name}" for where, a in proposal.attributes_with_owner() if a.pii]
    if pii:
        lines.append("  PII proposed (confirm): " + ", ".join(pii))
    for point in proposal.undecided:
        lines.append(f"  REVIEW {point}")
    return lines
