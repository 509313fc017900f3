"""Loading table contracts: YAML files into `TableContract`s (model.py), validated.

A contract is a YAML file in a folder of contracts, chosen by `choose_contracts`: the one
`--contracts-dir` or `$LAKEHOUSE_CONTRACTS_DIR` names, else the user's own in
`streaming/contracts/`, else the demo's sample tables in `streaming/samples/contracts/`.
Loading validates it completely without Spark, so a bad contract fails at start-up
with the file, the offending field and its line in the message, never in the middle
of a batch. A single-table design's file becomes one contract per entity plus its
unrouted table; `load_contracts`, the one way to read a folder of contracts, keys them
by raw table name. What only Spark can judge (a partition expression's columns) is
checked once a session exists, by spark_schema.check_partition_expression.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from streaming.contracts.model import (
    ATTRIBUTE_TYPES,
    CAST_TYPES,
    KEY_TYPES,
    MAX_DECIMAL_PRECISION,
    MAX_NESTING_DEPTH,
    UNROUTED_SUFFIX,
    AttributeSpec,
    ContractError,
    Route,
    TableContract,
    nesting_depth,
    parse_cast,
)
from streaming.contracts.names import (
    CAST_TEXT_SUFFIX,
    DYNAMODB_TABLE_NAME,
    DYNAMODB_TABLE_RULE,
    MAX_COLUMN_LENGTH,
    MAX_RAW_TABLE_LENGTH,
    MODEL_COLUMNS,
    SQL_NAME,
    SQL_NAME_RULE,
    jinja_opener,
    reserved_in,
)

CONTRACTS_DIR_ENV = "LAKEHOUSE_CONTRACTS_DIR"
# The user's own contracts (where `lakehouse contract infer --out` writes them) and the
# demo's sample tables, each read as package resources: in the zip the Glue job imports
# this package from (--extra-py-files) they are zip members, not folders on disk.
OWN_CONTRACTS_DIR = Path(__file__).parent
SAMPLE_CONTRACTS_DIR = OWN_CONTRACTS_DIR.parent / "samples" / "contracts"
CONTRACT_SUFFIXES = (".yml", ".yaml")
# The dbt var by which dbt_project.yml enables the sample tables' models: true exactly
# when the contracts are the samples.
SAMPLES_DBT_VAR = "lakehouse_samples"

_TOP_LEVEL_KEYS = frozenset(
    {"table", "raw_table", "description", "key", "attributes", "partitioning", "entities", "unrouted_table"}
)
_ENTITY_KEYS = frozenset({"raw_table", "description", "match", "attributes"})
_MATCH_KEYS = frozenset({"partition_key_prefix", "sort_key_prefix", "sort_key_equals", "attribute", "equals"})
_KEY_KEYS = frozenset({"partition_key", "sort_key"})
_PARTITIONING_KEYS = frozenset({"column", "expression"})
_ATTRIBUTE_KEYS = frozenset({"column", "type", "cast", "pii", "description", "items", "fields"})
# A list item has no name or column of its own: it lives inside its list's column.
_ITEM_KEYS = frozenset({"type", "cast", "description", "items", "fields"})

# A partition expression must give a key the same partition every time it is computed
# (a REMOVE and its item, a replay and its original, a reprocess and the live table).
# Spark flags the first group nondeterministic; spark_schema.check_partition_expression asks
# Spark itself whenever a session exists, which also covers functions missing here. This
# list refuses them earlier, at load time, where there is no Spark session.
_NONDETERMINISTIC_FUNCTIONS = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "input_file_block_start", "input_file_block_length",
})
# Spark flags these deterministic because it folds each to one value per query (the
# CURRENT_LIKE expressions of apache/spark sql/catalyst/src/main/scala/org/apache/spark/
# sql/catalyst/expressions/datetimeExpressions.scala, replaced by the optimizer rule
# ComputeCurrentTime), or they depend on the session: the same key still lands in a
# different partition on another run. Spark's flag cannot catch them; only this list does.
# Spark SQL accepts several without parentheses (`current_date`).
_PER_RUN_FUNCTIONS = frozenset({
    "current_date", "curdate", "current_timestamp", "now", "localtimestamp", "current_timezone",
    "current_user", "user", "session_user", "current_database", "current_schema", "current_catalog",
})
# Without arguments these read the clock; with a time argument they are deterministic.
_CLOCK_WITHOUT_ARGUMENTS = frozenset({"unix_timestamp", "unix_date", "unix_seconds"})
_SQL_STRING_OR_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")
_IDENTIFIER_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(\(\s*\)|\()?")


class _DuplicateKey(yaml.MarkedYAMLError):
    """A mapping repeats a key (PyYAML would keep the last silently)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key repeated in one mapping at any depth.

    The YAML spec requires mapping keys to be unique; PyYAML keeps the last value, so
    a contract with `email:` twice would silently lose the first attribute spec.
    Keys brought in by a merge (`<<: *anchor`) may still be overridden, as YAML intends.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first_seen.get(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if earlier is not None:
                raise _DuplicateKey(
                    f"first at line {earlier.start_mark.line + 1}",
                    node.start_mark,
                    f"key {key!r} appears twice",
                    key_node.start_mark,
                )
            first_seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def snake_case(name: str) -> str:
    """`custName` -> `cust_name`, `receiptURL` -> `receipt_url`, `order-id` -> `order_id`."""
    split_acronyms = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    split_words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", split_acronyms)
    return re.sub(r"[^0-9a-zA-Z]+", "_", split_words).strip("_").lower()


def load_contract_file(path: str | Path | Traversable) -> tuple[TableContract, ...]:
    """The raw tables one contract file describes: one for a plain DynamoDB table; one per
    entity plus the unrouted table for a single-table design."""
    path = path if isinstance(path, Traversable) else Path(path)
    content = path.read_bytes()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content.count(b"\n", 0, exc.start) + 1
        column = exc.start - (content.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ContractError(
            f"{path}: line {line}, column {column}: byte {content[exc.start]:#04x} is not UTF-8; "
            "save the contract as UTF-8"
        ) from exc
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        document = None if node is None else loader.construct_document(node)
    except _DuplicateKey as exc:
        mark = exc.problem_mark
        raise ContractError(f"{path}: line {mark.line + 1}: {exc.problem} in one mapping ({exc.context}); "
                            "YAML keys must be unique, remove or rename one") from exc
    except yaml.YAMLError as exc:
        raise ContractError(f"{path}: not valid YAML: {exc}") from exc
    finally:
        loader.dispose()
    return _parse_contract(document, _Source(str(path), _key_lines(node)))


@dataclass(frozen=True)
class ContractSet:
    """The folder of contracts a command reads, and why it was chosen."""

    folder: Path | Traversable
    # The demo's sample tables (streaming/samples/contracts/), named or fallen back on.
    is_samples: bool
    # Named by --contracts-dir or $LAKEHOUSE_CONTRACTS_DIR rather than found by default.
    named: bool

    def fallback_notice(self) -> str | None:
        """The line a command prints when it fell back on the samples: a user who expects
        their own tables must not take the demo's for theirs."""
        if not self.is_samples or self.named:
            return None
        tables = ", ".join(entry.name.rsplit(".", 1)[0] for entry in contract_files(self.folder))
        return (f"no contracts of your own in streaming/contracts/: using the sample tables {tables} "
                "(lakehouse contract infer adds yours; docs/contracts.md)")


def own_contracts_folder() -> Traversable:
    return resources.files("streaming") / OWN_CONTRACTS_DIR.name


def sample_contracts_folder() -> Traversable:
    return resources.files("streaming") / SAMPLE_CONTRACTS_DIR.parent.name / SAMPLE_CONTRACTS_DIR.name


def contract_files(folder: Path | Traversable) -> list[Path | Traversable]:
    """The contract files of `folder`, in file-name order (the order they are read in)."""
    return sorted((entry for entry in folder.iterdir() if entry.name.endswith(CONTRACT_SUFFIXES)),
                  key=lambda entry: entry.name)


def choose_contracts(directory: str | Path | None = None) -> ContractSet:
    """The contracts every command reads: `directory` or $LAKEHOUSE_CONTRACTS_DIR when
    given; else the user's own in streaming/contracts/ when it holds at least one; else
    the demo's sample tables, so that the demo and a first `lakehouse stream` work on a
    fresh checkout while a user's lakehouse never carries the demo's tables beside theirs."""
    given = directory or os.environ.get(CONTRACTS_DIR_ENV)
    if given:
        return ContractSet(Path(given), Path(given).resolve() == SAMPLE_CONTRACTS_DIR.resolve(), named=True)
    own = own_contracts_folder()
    if contract_files(own):
        return ContractSet(own, is_samples=False, named=False)
    return ContractSet(sample_contracts_folder(), is_samples=True, named=False)


def load_contracts(directory: str | Path | None = None) -> dict[str, TableContract]:
    """All contracts of `choose_contracts(directory)`, one per raw table, keyed by raw table name."""
    return load_contract_folder(choose_contracts(directory).folder)


def with_sample_contracts(contracts: Mapping[str, TableContract]) -> dict[str, TableContract]:
    """`contracts` with the sample tables' beside them, for what dbt reads the contracts
    through (the generated macros): the one dbt project holds the sample tables' models
    too, built by the demo in any data directory. A raw table of `contracts` wins over a
    sample's of the same name."""
    return {**load_contract_folder(sample_contracts_folder()), **contracts}


def load_contract_folder(folder: Path | Traversable) -> dict[str, TableContract]:
    """All contracts in `folder`, one per raw table, keyed by raw table name."""
    if not folder.is_dir():
        raise ContractError(f"{folder}: contracts directory does not exist")
    paths = contract_files(folder)
    if not paths:
        raise ContractError(f"{folder}: no table contracts (*.yml) found")
    contracts: dict[str, TableContract] = {}
    table_origin: dict[str, Path | Traversable] = {}
    raw_origin: dict[str, Path | Traversable] = {}
    for path in paths:
        described = load_contract_file(path)
        table = described[0].table
        if table in table_origin:
            raise ContractError(f"{path}: table {table!r} is already defined in {table_origin[table]}")
        table_origin[table] = path
        for contract in described:
            if contract.raw_table in raw_origin:
                raise ContractError(
                    f"{path}: raw_table {contract.raw_table!r} is already used by {raw_origin[contract.raw_table]}"
                )
            contracts[contract.raw_table] = contract
            raw_origin[contract.raw_table] = path
    for contract in contracts.values():
        if contract.changes_table in raw_origin:
            raise ContractError(
                f"{raw_origin[contract.changes_table]}: raw_table {contract.changes_table!r} is the name of the "
                f"change log of {contract.raw_table!r} ({raw_origin[contract.raw_table]}); choose another name"
            )
    return contracts


class _Source:
    """Where a contract came from, for error messages: the file and the line of each key."""

    def __init__(self, path: str, lines: Mapping[tuple[str, ...], int]) -> None:
        self.path = path
        self.lines = lines

    def __str__(self) -> str:
        return self.path

    def at(self, field: str) -> str:
        """`<file>: line N: <field>` (the line of the field's key, or its nearest parent's)."""
        parts = tuple(field.split("."))
        while parts and parts not in self.lines:
            parts = parts[:-1]
        line = f"line {self.lines[parts]}: " if parts else ""
        return f"{self.path}: {line}{field}"


def _key_lines(node: yaml.Node | None, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """The 1-based line of every mapping key of a composed YAML document, by its path."""
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*path, str(key_node.value))
                lines[child] = key_node.start_mark.line + 1
                lines.update(_key_lines(value_node, child))
    return lines


def _parse_contract(document: Any, source: _Source) -> tuple[TableContract, ...]:
    if not isinstance(document, Mapping):
        raise ContractError(f"{source}: a contract must be a YAML mapping")
    _reject_unknown(document, _TOP_LEVEL_KEYS, source, "")
    table = _required_text(document, "table", source)
    if not DYNAMODB_TABLE_NAME.fullmatch(table):
        raise ContractError(f"{source.at('table')} {table!r} is not a DynamoDB table name: {DYNAMODB_TABLE_RULE}")
    has_entities = "entities" in document
    if has_entities:
        if "raw_table" in document:
            raise ContractError(
                f"{source.at('raw_table')}: a contract with entities names a raw_table per entity "
                "(items matching no entity land in unrouted_table); remove the top-level raw_table"
            )
        raw_table = document.get("unrouted_table", snake_case(table) + UNROUTED_SUFFIX)
        raw_table_field = "unrouted_table"
        raw_table_hint = "" if "unrouted_table" in document else f" (derived from table {table!r}; set unrouted_table:)"
    else:
        if "unrouted_table" in document:
            raise ContractError(f"{source.at('unrouted_table')}: is only allowed with entities")
        raw_table = _required_text(document, "raw_table", source)
        raw_table_field = "raw_table"
        raw_table_hint = ""
    _check_sql_name(raw_table, source, raw_table_field, raw_table_hint or "; choose another name",
                    max_length=MAX_RAW_TABLE_LENGTH)

    key = _section(document, "key", _KEY_KEYS, source, "partition_key (and optional sort_key)")
    partition_key = _required_text(key, "partition_key", source, "key.")
    sort_key = key.get("sort_key")
    if sort_key is not None and (not isinstance(sort_key, str) or not sort_key):
        raise ContractError(f"{source}: key.sort_key must be a non-empty string")

    raw_attributes = document.get("attributes")
    if not isinstance(raw_attributes, Mapping) or not raw_attributes:
        raise ContractError(f"{source}: attributes: must be a non-empty mapping of attribute name to spec")
    attributes = tuple(
        _parse_attribute(str(name), spec, source, f"attributes.{name}") for name, spec in raw_attributes.items()
    )
    attribute_names = [(spec.name, f"attributes.{spec.name}") for spec in attributes]
    declared = {spec.name: spec for spec in attributes}
    for key_name, key_field in ((partition_key, "partition_key"), (sort_key, "sort_key")):
        if key_name is None:
            continue
        if key_name not in declared:
            raise ContractError(f"{source}: key.{key_field} {key_name!r} is not declared under attributes")
        if declared[key_name].type not in KEY_TYPES:
            raise ContractError(
                f"{source}: key.{key_field} {key_name!r} has type {declared[key_name].type}; "
                f"key attributes must be one of {sorted(KEY_TYPES)}"
            )

    partitioning = _section(document, "partitioning", _PARTITIONING_KEYS, source, "column and expression")
    partition_column = _required_text(partitioning, "column", source, "partitioning.")
    partition_expression = partitioning.get("expression")
    if not isinstance(partition_expression, str) or not partition_expression.strip():
        raise ContractError(f"{source}: partitioning.expression is empty")
    _refuse_nondeterministic(partition_expression, {spec.column for spec in attributes}, source)

    _check_columns(attributes, partition_column, source, lambda spec: f"attributes.{spec.name}")
    _check_nesting(attributes, source, lambda spec: f"attributes.{spec.name}")
    description = document.get("description") or ""
    if not isinstance(description, str):
        raise ContractError(f"{source}: description must be text")
    _refuse_jinja(description, source, "description")
    table_contract = TableContract(
        table=table,
        raw_table=raw_table,
        description=description,
        partition_key=partition_key,
        sort_key=sort_key,
        attributes=attributes,
        partition_column=partition_column,
        partition_expression=partition_expression.strip(),
        unrouted=has_entities,
    )
    if not has_entities:
        _refuse_case_twins(attribute_names, source)
        return (table_contract,)
    entities = _parse_entities(document["entities"], table_contract, source, attribute_names)
    return (*entities, replace(
        table_contract,
        description=f"Items of the DynamoDB table {table} that match none of its entities "
        f"({', '.join(entity.entity or '' for entity in entities)}); each row keeps its change record.",
    ))


def _parse_entities(
    raw_entities: Any, shared: TableContract, source: _Source, attribute_names: list[tuple[str, str]]
) -> tuple[TableContract, ...]:
    """One contract per entity: the shared attributes (keys first) and the entity's own.

    `attribute_names` holds the shared attributes' names and fields; the entities' own
    and their match attributes are added, and no two may differ only in case."""
    if not isinstance(raw_entities, Mapping) or not raw_entities:
        raise ContractError(f"{source.at('entities')}: must be a non-empty mapping of entity name to spec")
    entities: list[TableContract] = []
    raw_tables = {shared.raw_table: "unrouted_table"}
    for name, spec in raw_entities.items():
        where = f"entities.{name}"
        if not isinstance(spec, Mapping):
            raise ContractError(f"{source.at(where)}: must be a mapping with raw_table, match and attributes")
        if not SQL_NAME.fullmatch(str(name)):
            raise ContractError(f"{source.at(where)}: entity name {name!r} must be {SQL_NAME_RULE}")
        _reject_unknown(spec, _ENTITY_KEYS, source, f"{where}.")
        raw_table = spec.get("raw_table")
        _check_sql_name(raw_table, source, f"{where}.raw_table", "; choose another name",
                        max_length=MAX_RAW_TABLE_LENGTH)
        if raw_table in raw_tables:
            raise ContractError(
                f"{source.at(where + '.raw_table')}: {raw_table!r} is already the raw table of "
                f"{raw_tables[raw_table]}; each entity needs a raw table of its own"
            )
        raw_tables[raw_table] = where
        route = _parse_route(spec.get("match"), shared, source, f"{where}.match")
        if route.attribute is not None:
            attribute_names.append((route.attribute, f"{where}.match.attribute"))
        description = spec.get("description") or ""
        if not isinstance(description, str):
            raise ContractError(f"{source.at(where + '.description')}: must be text")
        _refuse_jinja(description, source, f"{where}.description")
        own = spec.get("attributes") or {}
        if not isinstance(own, Mapping):
            raise ContractError(f"{source.at(where + '.attributes')}: must be a mapping of attribute name to spec")
        attributes = {attribute.name: attribute for attribute in shared.attributes}
        for attribute_name, attribute_spec in own.items():
            attribute_where = f"{where}.attributes.{attribute_name}"
            attribute = _parse_attribute(str(attribute_name), attribute_spec, source, attribute_where)
            attribute_names.append((attribute.name, attribute_where))
            earlier = attributes.get(attribute.name)
            if earlier is not None and (earlier.type, earlier.column) != (attribute.type, attribute.column):
                what = "key attribute" if attribute.name in shared.key_attributes else "shared attribute"
                raise ContractError(
                    f"{source.at(attribute_where)}: redeclares the {what} {attribute.name!r} "
                    f"(type {earlier.type}, column {earlier.column}) as type {attribute.type}, column "
                    f"{attribute.column}; an entity may only repeat it with the same type and column"
                )
            attributes[attribute.name] = attribute
        entity = replace(
            shared,
            raw_table=raw_table,
            description=description,
            attributes=tuple(attributes.values()),
            entity=str(name),
            route=route,
            unrouted=False,
        )
        own_names = {str(attribute_name) for attribute_name in own}
        _check_columns(
            entity.attributes, entity.partition_column, source,
            lambda spec, where=where, own_names=own_names: (
                f"{where}.attributes.{spec.name}" if spec.name in own_names else f"attributes.{spec.name}"
            ),
        )
        own_attributes = tuple(spec for spec in entity.attributes if spec.name in own_names)
        _check_nesting(own_attributes, source, lambda spec, where=where: f"{where}.attributes.{spec.name}")
        entities.append(entity)
    _refuse_case_twins(attribute_names, source)
    for position, first in enumerate(entities):
        for second in entities[position + 1:]:
            assert first.route is not None and second.route is not None
            if first.route.may_overlap(second.route):
                raise ContractError(
                    f"{source.at(f'entities.{second.entity}.match')}: an item could match both entity "
                    f"{first.entity!r} ({first.route.describe()}; {source.at(f'entities.{first.entity}.match')}) "
                    f"and {second.entity!r} ({second.route.describe()}); make the rules exclusive, e.g. with "
                    "prefixes neither of which starts the other, or different values of one attribute"
                )
    return tuple(entities)


def _parse_route(match: Any, shared: TableContract, source: _Source, where: str) -> Route:
    if not isinstance(match, Mapping) or not match:
        raise ContractError(
            f"{source.at(where)}: every entity needs a match rule: partition_key_prefix, sort_key_prefix or "
            "sort_key_equals, and/or attribute with equals"
        )
    _reject_unknown(match, _MATCH_KEYS, source, f"{where}.")
    values: dict[str, str | None] = {}
    for field in sorted(_MATCH_KEYS):
        value = match.get(field)
        if value is not None and (not isinstance(value, str) or not value):
            raise ContractError(f"{source.at(f'{where}.{field}')}: must be non-empty text")
        values[field] = value
    if (values["attribute"] is None) != (values["equals"] is None):
        raise ContractError(f"{source.at(where)}: attribute and equals go together (the attribute's S value)")
    if values["sort_key_prefix"] is not None and values["sort_key_equals"] is not None:
        raise ContractError(f"{source.at(f'{where}.sort_key_equals')}: give sort_key_prefix or sort_key_equals, "
                            "not both (a whole sort key already says its prefix)")
    for field, key_name in (("partition_key_prefix", shared.partition_key), ("sort_key_prefix", shared.sort_key),
                            ("sort_key_equals", shared.sort_key)):
        if values[field] is None:
            continue
        if key_name is None:
            raise ContractError(f"{source.at(f'{where}.{field}')}: the table has no sort key")
        if shared.attribute(key_name).type != "S":
            what = "a prefix" if field.endswith("_prefix") else "sort_key_equals"
            raise ContractError(
                f"{source.at(f'{where}.{field}')}: the key {key_name!r} has type "
                f"{shared.attribute(key_name).type}; {what} needs an S key"
            )
    if values["attribute"] in shared.key_attributes:
        raise ContractError(f"{source.at(f'{where}.attribute')}: match a key attribute with a prefix rule")
    return Route(
        partition_key_prefix=values["partition_key_prefix"],
        sort_key_prefix=values["sort_key_prefix"],
        sort_key_equals=values["sort_key_equals"],
        attribute=values["attribute"],
        equals=values["equals"],
    )


def _parse_attribute(name: str, spec: Any, source: _Source, where: str, *, is_item: bool = False) -> AttributeSpec:
    if not isinstance(spec, Mapping):
        raise ContractError(f"{source}: {where}: must be a mapping with at least a type")
    _reject_unknown(spec, _ITEM_KEYS if is_item else _ATTRIBUTE_KEYS, source, f"{where}.")
    attribute_type = spec.get("type")
    if attribute_type not in ATTRIBUTE_TYPES:
        raise ContractError(
            f"{source}: {where}.type {attribute_type!r} is not a DynamoDB type; use one of {sorted(ATTRIBUTE_TYPES)}"
        )
    if "column" in spec:
        column = spec["column"]
        _check_sql_name(column, source, f"{where}.column", "; choose another column name",
                        max_length=MAX_COLUMN_LENGTH)
    else:
        column = snake_case(name)
        _check_sql_name(column, source, f"{where}.column", _derived_column_hint(name, column),
                        max_length=MAX_COLUMN_LENGTH)
    cast = spec.get("cast")
    if cast is not None:
        _check_cast(cast, source, where)
    pii = spec.get("pii", False)
    if not isinstance(pii, bool):
        raise ContractError(f"{source}: {where}.pii must be true or false")
    description = spec.get("description") or ""
    if not isinstance(description, str):
        raise ContractError(f"{source}: {where}.description must be text")
    _refuse_jinja(description, source, f"{where}.description")

    items: AttributeSpec | None = None
    if attribute_type == "L":
        if "items" not in spec:
            raise ContractError(f"{source}: {where}: type L needs items (the type of its elements)")
        items = _parse_attribute(name, spec["items"], source, f"{where}.items", is_item=True)
    elif "items" in spec:
        raise ContractError(f"{source}: {where}.items is only allowed with type L")

    fields: tuple[AttributeSpec, ...] = ()
    if attribute_type == "M":
        raw_fields = spec.get("fields")
        if not isinstance(raw_fields, Mapping) or not raw_fields:
            raise ContractError(f"{source}: {where}: type M needs fields (a mapping of field name to spec)")
        fields = tuple(
            _parse_attribute(str(field_name), field_spec, source, f"{where}.fields.{field_name}")
            for field_name, field_spec in raw_fields.items()
        )
        _check_unique([field.column for field in fields], source, f"{where}.fields")
        _refuse_case_twins([(field.name, f"{where}.fields.{field.name}") for field in fields], source)
    elif "fields" in spec:
        raise ContractError(f"{source}: {where}.fields is only allowed with type M")

    return AttributeSpec(
        name=name,
        column=column,
        type=attribute_type,
        cast=cast,
        pii=pii,
        description=description,
        items=items,
        fields=fields,
    )


def _check_cast(cast: Any, source: _Source, where: str) -> None:
    if not isinstance(cast, str) or parse_cast(cast) is None:
        raise ContractError(
            f"{source}: {where}.cast {cast!r} is not a cast staging knows; use one of {list(CAST_TYPES)} "
            f"(decimal: 1 <= p <= {MAX_DECIMAL_PRECISION}, 0 <= s <= p)"
        )


def _refuse_nondeterministic(expression: str, columns: set[str], source: _Source) -> None:
    """Refuse a partition expression calling a function of the two lists above.

    String literals and quoted identifiers are skipped; a bare word that is one of the
    contract's columns is the column, not the function.
    """
    code = _SQL_STRING_OR_QUOTED.sub(" ", expression)
    for match in _IDENTIFIER_CALL.finditer(code):
        name, call = match.group(1).lower(), match.group(2)
        called_empty = call is not None and call.replace(" ", "") == "()"
        if (
            (name in _NONDETERMINISTIC_FUNCTIONS and call is not None)
            or (name in _PER_RUN_FUNCTIONS and (call is not None or name not in columns))
            or (name in _CLOCK_WITHOUT_ARGUMENTS and called_empty)
        ):
            why = "random or row-dependent" if name in _NONDETERMINISTIC_FUNCTIONS else "its value depends on the run"
            raise ContractError(
                f"{source}: partitioning.expression {expression!r} calls {name}() ({why}); a key must get the "
                "same partition every time, so use a deterministic function of the key columns"
            )


def _check_columns(
    attributes: tuple[AttributeSpec, ...], partition_column: str, source: _Source, where_of: Callable[[AttributeSpec], str]
) -> None:
    """The top-level columns of one raw table: unique, and none a column the dbt models add
    (names.MODEL_COLUMNS, and `<column>_text` beside a column with a cast): the models
    select raw rows with `*` and then add theirs, so a business column of such a name
    would bind where the models mean their own (`where change_rank = 1`) or push theirs
    aside (`is_deleted_1`), silently."""
    _check_sql_name(partition_column, source, "partitioning.column", "; choose another column name",
                    max_length=MAX_COLUMN_LENGTH)
    texts = {spec.column + CAST_TEXT_SUFFIX: spec for spec in attributes if spec.cast is not None}
    for column, where in [*((spec.column, where_of(spec)) for spec in attributes), (partition_column, "partitioning.column")]:
        if column in MODEL_COLUMNS:
            taken = "a column the dbt models add (change_rank, item_key, is_deleted, valid_from, ...)"
        elif column in texts:
            taken = f"the column that keeps {texts[column].column!r} as received, beside its cast"
        else:
            continue
        raise ContractError(
            f"{source.at(where)}: column {column!r} is {taken}; the models would read the wrong one. "
            f"Name the column apart with `column:` (e.g. `column: {column}_value`)"
        )
    columns = [spec.column for spec in attributes]
    _check_unique([*columns, partition_column], source, "attributes/partitioning.column")


def _check_nesting(
    attributes: tuple[AttributeSpec, ...], source: _Source, where_of: Callable[[AttributeSpec], str]
) -> None:
    """No attribute nests deeper than the raw tables' readers follow (model.MAX_NESTING_DEPTH):
    one that did would make its raw table unreadable to hudi-rs, so to status, reconcile and dbt."""
    for spec in attributes:
        depth = nesting_depth(spec)
        if depth > MAX_NESTING_DEPTH:
            raise ContractError(
                f"{source.at(where_of(spec))}: attribute {spec.name!r} nests {depth} levels of maps and lists; "
                f"the raw tables' readers follow at most {MAX_NESTING_DEPTH} (hudi-rs cannot parse a deeper "
                f"table schema). Declare it {MAX_NESTING_DEPTH} levels deep at most: what is not declared lands "
                "in _extra_attributes as DynamoDB JSON"
            )


def _check_sql_name(name: Any, source: _Source, where: str, hint: str, *, max_length: int) -> None:
    """A raw table or column name: lower snake_case and no engine's reserved word, since
    it appears unquoted in DuckDB, Athena DDL and Athena queries, and short enough for the
    names derived from it (names.py). `hint` ends the message."""
    if not isinstance(name, str) or not SQL_NAME.fullmatch(name):
        raise ContractError(f"{source.at(where)} {name!r} must be {SQL_NAME_RULE}{hint}")
    if len(name) > max_length:
        raise ContractError(f"{source.at(where)} {name[:40]!r}... is {len(name)} characters, over the "
                            f"{max_length} that leave room for the names derived from it{hint}")
    engines = reserved_in(name)
    if engines:
        raise ContractError(f"{source.at(where)} {name!r} is a reserved word in {', '.join(engines)}{hint}")


def _derived_column_hint(name: str, column: str) -> str:
    return (f" (derived from the attribute name {name!r}); name the column with `column:`, "
            f"e.g. `column: {column or 'attribute'}_value`")


def _refuse_jinja(text: str, source: _Source, where: str) -> None:
    """Descriptions reach the dbt YAML scaffold writes, and dbt renders them with Jinja."""
    opener = jinja_opener(text)
    if opener is not None:
        raise ContractError(
            f"{source.at(where)}: holds {opener!r}, which dbt would run as Jinja in the docs scaffold writes; "
            "write the text without '{{', '{%' and '{#'"
        )


def _refuse_case_twins(names: list[tuple[str, str]], source: _Source) -> None:
    """DynamoDB tells `Status` from `status`; Spark does not (it resolves fields case-
    insensitively), so a contract naming both fails every batch of every table with
    AMBIGUOUS_REFERENCE_TO_FIELDS. `names` pairs each name with its field."""
    first: dict[str, tuple[str, str]] = {}
    for name, where in names:
        earlier = first.setdefault(name.casefold(), (name, where))
        if earlier[0] != name:
            raise ContractError(
                f"{source.at(where)}: {name!r} differs from {earlier[0]!r} ({source.at(earlier[1])}) only in "
                "case; Spark reads them as one field, so keep only one of them in the contract"
            )


def _check_unique(columns: list[str], source: _Source, where: str) -> None:
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            raise ContractError(f"{source}: {where}: duplicate column name {column!r}")
        seen.add(column)


def _section(
    document: Mapping[str, Any], name: str, allowed: frozenset[str], source: _Source, expected: str
) -> Mapping[str, Any]:
    """A nested mapping of the contract (`key`, `partitioning`), with unknown keys rejected."""
    section = document.get(name)
    if not isinstance(section, Mapping):
        raise ContractError(f"{source}: {name}: must be a mapping with {expected}")
    _reject_unknown(section, allowed, source, f"{name}.")
    return section


def _reject_unknown(mapping: Mapping[str, Any], allowed: frozenset[str], source: _Source, prefix: str) -> None:
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if unknown:
        raise ContractError(f"{source}: unknown keys {[prefix + key for key in unknown]}; allowed: {sorted(allowed)}")


def _required_text(mapping: Mapping[str, Any], key: str, source: _Source, prefix: str = "") -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ContractError(f"{source}: {prefix}{key} is required (non-empty text)")
    return value
