"""Contract evolution: a changed contract may only add columns to a raw table that has rows.

The raw layer outlives every run: a contract edited between two runs on the same data
root would otherwise give the next batches other columns (a renamed `email` lands in a
new column and the old one turns NULL for every later change), and nothing downstream
notices. So each raw table's contract is registered under the raw root, and a stream
start compares the contracts it was given with the registered ones:

* only additions (a new attribute, a new field in an M, also inside a list's items):
  allowed; rows written earlier read the new column as null. A new version is registered.
* `description`, `pii` or `cast` edits: allowed and reported; raw columns stay as they are.
* removing an attribute registered deeper than model.MAX_NESTING_DEPTH (before the loader
  refused such): allowed and reported, since hudi-rs cannot read its raw tables; the Hudi
  sink drops its column, and its values land in `_extra_attributes`.
* anything else (a removed or renamed attribute, a new column name, a new DynamoDB type,
  another key, partition column or expression, raw_table or table name): refused before
  anything is written.
* entities of a single-table design: a new one is allowed (the items it names leave the
  unrouted table through `lakehouse unrouted replay`). Another match rule, or an entity
  removed, is refused once its raw table holds rows: the items it holds would go on being
  current there while their later changes land elsewhere, so one key would be current in
  two raw tables. Removing one entity and adding another is a removal, not a rename. The way forward is to rebuild the raw layer under the new contract
  (`lakehouse reprocess --to <new data root>`, then `lakehouse switch`).

A registered version binds only once its raw table holds rows. A start checks the
contracts before Spark starts, and registers them only once Spark has planned every raw
table (runtime/startup.py, step 2), so a start that could not write (Java missing, a plan
Spark refused) registers nothing and the version the rows were written under stays the
one compared. A start that registered and then wrote nothing to a table (it stopped
before the table's first change) leaves a version no row follows: while the table holds
no rows at all, any contract may replace it, e.g. one that renames a column with `column:`. A raw table
holds rows once anything exists in its folder or its change log's (`<raw root>/<raw_table>`,
`<raw root>/<raw_table>_changes`): both sinks create them with the first rows they write.

The match rule is kept in the registered document but is not part of the version: it
decides which rows a raw table gets, not its columns. Versions registered before the
rule was kept hold none, and their rule is not compared.

Versions. `contract_version` is the first 12 hex digits of the SHA-256 of the canonical
JSON (keys sorted, `(",", ":")` separators, ASCII escapes) of `column_document(...)`,
the part of `schema_document` that decides the raw columns: table, raw_table, key,
partitioning and every attribute's column and type with its items or fields, but no
description, pii or cast. Attributes are keyed by their DynamoDB name, so neither the
order of keys in the YAML file nor the Python process changes a version; any edit that
changes raw columns does.

Registry. `<raw root>/_contracts/<raw_table>/<version>.json` holds the schema document,
the version, its sequence number within the table and `registered_at`. Raw readers never
look there: they read `<raw root>/<raw_table>...` folders named by the contracts, and a
raw_table name must start with a letter. Files go through `RegistryFileSystem`
(read_text / write_text / list) and every write replaces a file atomically:
`LocalFileSystem` writes a temporary file and renames it, `S3FileSystem` puts one object.
Another store (Hadoop) needs only those three calls.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from streaming.atomic_files import write_text_atomically
from streaming.contracts.model import CHANGES_SUFFIX, MAX_NESTING_DEPTH, AttributeSpec, Route, TableContract
from streaming.errors import OperatorError
from streaming.s3_locations import S3_SCHEMES, s3_bucket_and_key, url_scheme

log = logging.getLogger(__name__)

# Bumped when the layout of the schema document changes; a registry entry of another
# format cannot be compared field by field and is reported instead of misread.
SCHEMA_FORMAT = 1
VERSION_LENGTH = 12
REGISTRY_FOLDER = "_contracts"
# Edits of these keys never change a raw column; they are reported, not refused.
ANNOTATION_KEYS = ("description", "pii", "cast")
REPROCESS_HINT = (
    "To keep streaming into the current raw layer, restore the registered contract. To apply the new "
    "contract, rebuild the raw layer under it from the retained landing files and exports with "
    "`lakehouse reprocess --to <new data root>`, check the result with `lakehouse reconcile`, then "
    "`lakehouse switch --to <new data root>`."
)


class ContractEvolutionError(OperatorError, ValueError):
    """A contract changes the columns of a raw table that already has a registered contract."""

    def __init__(self, reports: Sequence[EvolutionReport]) -> None:
        self.reports = tuple(reports)
        super().__init__(_refusal_message(self.reports))


@dataclass(frozen=True)
class EvolutionReport:
    """How a contract differs from the one registered for its raw table, one readable line per change."""

    table: str
    raw_table: str
    previous_version: str
    current_version: str
    additions: tuple[str, ...] = ()
    harmless: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.refused


# --------------------------------------------------------------------------- documents


def schema_document(contract: TableContract) -> dict[str, Any]:
    """Everything that decides the contract's raw columns, plus its descriptions, pii and casts.

    JSON-serialisable; attributes and M fields are mappings keyed by DynamoDB name.
    """
    document = {
        "format": SCHEMA_FORMAT,
        "table": contract.table,
        "raw_table": contract.raw_table,
        "description": contract.description,
        "key": {"partition_key": contract.partition_key, "sort_key": contract.sort_key},
        "partitioning": {"column": contract.partition_column, "expression": contract.partition_expression},
        "attributes": {spec.name: _attribute_document(spec) for spec in contract.attributes},
    }
    # Only an unrouted table has the change-record column; a plain table's document (and
    # so its version) stays what it was before single-table designs existed.
    if contract.unrouted:
        document["unrouted"] = True
    if contract.route is not None:
        route = asdict(contract.route)
        # A rule without a whole sort key keeps the document it was registered with
        # before sort_key_equals existed, so that comparing the two sees no new rule.
        if route["sort_key_equals"] is None:
            del route["sort_key_equals"]
        document["route"] = route
    return document


def column_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a schema document that decides raw columns: no description, pii or cast."""
    columns = {
        "format": document["format"],
        "table": document["table"],
        "raw_table": document["raw_table"],
        "key": dict(document["key"]),
        "partitioning": dict(document["partitioning"]),
        "attributes": {name: _column_part(spec) for name, spec in document["attributes"].items()},
    }
    if document.get("unrouted"):
        columns["unrouted"] = True
    return columns


def document_version(document: Mapping[str, Any]) -> str:
    """The version of a schema document (also of a registry entry, which holds one)."""
    canonical = json.dumps(column_document(document), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:VERSION_LENGTH]


def contract_version(contract: TableContract) -> str:
    """A short fingerprint of the contract's raw columns (see the module docstring for its definition)."""
    return document_version(schema_document(contract))


def _attribute_document(spec: AttributeSpec, *, is_item: bool = False) -> dict[str, Any]:
    # A list item has no name and no column of its own (it lives in its list's column),
    # and the contract gives it no pii flag: the list's flag covers it.
    document: dict[str, Any] = {"type": spec.type} if is_item else {"column": spec.column, "type": spec.type}
    if spec.items is not None:
        document["items"] = _attribute_document(spec.items, is_item=True)
    if spec.fields:
        document["fields"] = {member.name: _attribute_document(member) for member in spec.fields}
    document["cast"] = spec.cast
    if not is_item:
        document["pii"] = spec.pii
    document["description"] = spec.description
    return document


def _column_part(spec: Mapping[str, Any]) -> dict[str, Any]:
    part = {key: value for key, value in spec.items() if key not in ANNOTATION_KEYS}
    if "items" in part:
        part["items"] = _column_part(part["items"])
    if "fields" in part:
        part["fields"] = {name: _column_part(member) for name, member in part["fields"].items()}
    return part


# --------------------------------------------------------------------------- comparison


@dataclass
class _Changes:
    additions: list[str] = field(default_factory=list)
    harmless: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def evolution_changes(previous: Mapping[str, Any], current: TableContract) -> EvolutionReport:
    """Compare the registered schema document `previous` with the contract now given."""
    if previous.get("format") != SCHEMA_FORMAT:
        raise ValueError(
            f"registered contract of raw table {previous.get('raw_table')!r} has format {previous.get('format')!r}; "
            f"this version of lakehouse compares format {SCHEMA_FORMAT} only"
        )
    now = schema_document(current)
    changes = _Changes()
    for label, path in (
        ("table", ("table",)),
        ("raw_table", ("raw_table",)),
        ("key.partition_key", ("key", "partition_key")),
        ("key.sort_key", ("key", "sort_key")),
        ("partitioning.column", ("partitioning", "column")),
        ("partitioning.expression", ("partitioning", "expression")),
        ("unrouted", ("unrouted",)),
    ):
        old, new = _at(previous, path), _at(now, path)
        if old != new:
            changes.refused.append(f"{label}: {_show(old)} -> {_show(new)}")
    # A version registered before match rules were kept has none to compare.
    if "route" in previous and previous["route"] != now.get("route"):
        changes.refused.append(f"match: {_show_route(previous['route'])} -> {_show_route(now.get('route'))}")
    if previous["description"] != now["description"]:
        changes.harmless.append(f"description: {_show(previous['description'])} -> {_show(now['description'])}")
    _compare_members(previous["attributes"], now["attributes"], "", changes)
    # The loader refuses such an attribute now, so it cannot be restored; cut down, it is
    # a removal of nested fields, which the raw tables cannot take in place.
    for name, spec in previous["attributes"].items():
        depth = _document_depth(spec)
        if depth > MAX_NESTING_DEPTH and name in now["attributes"]:
            changes.refused.append(
                f"attribute {_quote(name)} was registered {depth} levels of maps and lists deep, deeper than "
                f"hudi-rs reads ({MAX_NESTING_DEPTH}): remove it from the contract (its column is then dropped "
                "and its values land in _extra_attributes), or rebuild the raw tables under the new contract"
            )
    return EvolutionReport(
        table=current.table,
        raw_table=current.raw_table,
        previous_version=document_version(previous),
        current_version=document_version(now),
        additions=tuple(changes.additions),
        harmless=tuple(changes.harmless),
        refused=tuple(changes.refused),
    )


def check_evolution(previous: Mapping[str, Any], current: TableContract) -> EvolutionReport:
    """The evolution report when every change is allowed; ContractEvolutionError otherwise."""
    report = evolution_changes(previous, current)
    if not report.allowed:
        raise ContractEvolutionError([report])
    return report


def _compare_members(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], prefix: str, changes: _Changes
) -> None:
    """Compare attributes (prefix "") or the fields of one M (prefix "<path>.")."""
    removed = [name for name in old if name not in new]
    added = [name for name in new if name not in old]
    # An attribute dropped while another one takes over its column is a rename of the
    # DynamoDB attribute: rows written before keep values from the old name.
    for old_name in list(removed):
        successor = next((name for name in added if new[name]["column"] == old[old_name]["column"]), None)
        if successor is not None:
            removed.remove(old_name)
            added.remove(successor)
            changes.refused.append(
                f"attribute {_quote(prefix + old_name)} -> {_quote(prefix + successor)}: "
                f"column {_quote(old[old_name]['column'])} now fed by a renamed attribute"
            )
    for name in removed:
        depth = _document_depth(old[name])
        if not prefix and depth > MAX_NESTING_DEPTH:
            # Registered before the loader refused it; the raw tables are unreadable to
            # hudi-rs while they hold its column, which the Hudi sink drops on its next write.
            changes.harmless.append(
                f"attribute {_quote(name)}: {_describe(old[name])} -> removed: it nests {depth} levels of maps "
                f"and lists, deeper than hudi-rs reads ({MAX_NESTING_DEPTH}); its column is dropped from the raw "
                "tables and its values land in _extra_attributes"
            )
            continue
        changes.refused.append(f"attribute {_quote(prefix + name)}: {_describe(old[name])} -> removed")
    for name in added:
        changes.additions.append(
            f"attribute {_quote(prefix + name)}: absent -> {_describe(new[name])} (null in rows written before)"
        )
    for name in old:
        if name in new:
            _compare_member(old[name], new[name], prefix + name, changes)


def _compare_member(old: Mapping[str, Any], new: Mapping[str, Any], path: str, changes: _Changes) -> None:
    """Compare one attribute, M field or list item (which has no column) kept under the same name."""
    if old.get("column") != new.get("column"):
        changes.refused.append(f"attribute {_quote(path)}: column {_quote(old['column'])} -> {_quote(new['column'])}")
    if old["type"] != new["type"]:
        changes.refused.append(f"attribute {_quote(path)}: type {old['type']} -> {new['type']}")
    elif old["type"] == "L":
        _compare_member(old["items"], new["items"], path + "[]", changes)
    elif old["type"] == "M":
        _compare_members(old["fields"], new["fields"], path + ".", changes)
    for key in ANNOTATION_KEYS:
        if old.get(key) != new.get(key):
            changes.harmless.append(f"attribute {_quote(path)}: {key} {_show(old.get(key))} -> {_show(new.get(key))}")


def _document_depth(spec: Mapping[str, Any]) -> int:
    """model.nesting_depth of an attribute as a schema document registers it."""
    if spec["type"] == "L" and "items" in spec:
        return 1 + _document_depth(spec["items"])
    if spec["type"] == "M":
        return 1 + max((_document_depth(member) for member in spec.get("fields", {}).values()), default=0)
    return 0


def _describe(spec: Mapping[str, Any]) -> str:
    return f"column {_quote(spec['column'])} ({spec['type']})"


def _at(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for key in path:
        value = value.get(key)
    return value


def _quote(text: str) -> str:
    return f"'{text}'"


def _show_route(route: Mapping[str, Any] | None) -> str:
    if route is None:
        return "(none: no longer an entity)"
    return Route(**route).describe()


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _quote(str(value))


def _refusal_message(reports: Sequence[EvolutionReport]) -> str:
    lines = [f"contract changes refused for {len(reports)} raw table(s); each holds rows written under the "
             "registered contract, which the change would contradict:"]
    for report in reports:
        lines.append(
            f"raw table {_quote(report.raw_table)} (DynamoDB table {_quote(report.table)}, registered version "
            f"{report.previous_version} -> contract version {report.current_version}):"
        )
        lines.extend(f"  - {change}" for change in report.refused)
    lines.append(REPROCESS_HINT)
    return "\n".join(lines)


# --------------------------------------------------------------------------- registry


class RegistryFileSystem(Protocol):
    """The three file operations the registry needs; paths are '/'-joined strings."""

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, text: str) -> None:
        """Replace `path` atomically: a reader sees the old content or the new, never part of it."""

    def list(self, directory: str) -> list[str]:
        """Names of the direct children of `directory`, sorted; [] when it does not exist."""


class LocalFileSystem:
    """RegistryFileSystem on local files."""

    def read_text(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8")

    def write_text(self, path: str, text: str) -> None:
        # Atomic; the temporary file's leading dot keeps it out of `ContractRegistry` listings.
        write_text_atomically(path, text)

    def list(self, directory: str) -> list[str]:
        folder = Path(directory)
        return sorted(child.name for child in folder.iterdir()) if folder.is_dir() else []


class S3FileSystem:
    """RegistryFileSystem on S3 objects (`s3://bucket/key`), as under the Glue job's raw_base_path.

    S3 stores an object whole or not at all ("Amazon S3 never adds partial objects", PutObject in
    https://boto3.amazonaws.com/v1/documentation/api/latest/reference/services/s3/client/put_object.html),
    so one put is the atomic replace LocalFileSystem builds from a temporary file and a rename.
    """

    def __init__(self, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self._client = client

    def read_text(self, path: str) -> str:
        bucket, key = s3_bucket_and_key(path)
        return self._client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        bucket, key = s3_bucket_and_key(path)
        self._client.put_object(Bucket=bucket, Key=key, Body=text.encode("utf-8"))

    def list(self, directory: str) -> list[str]:
        bucket, key = s3_bucket_and_key(directory)
        prefix = key.rstrip("/") + "/"
        names: set[str] = set()
        # With a delimiter, S3 answers the direct children: objects, and one common prefix per folder.
        for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
            names.update(folder["Prefix"][len(prefix):].rstrip("/") for folder in page.get("CommonPrefixes", []))
            names.update(item["Key"][len(prefix):] for item in page.get("Contents", []))
        return sorted(name for name in names if name)


class ContractRegistry:
    """Registered contract versions under `<raw root>/_contracts/<raw_table>/<version>.json`.

    An S3 raw root (`s3://`, or `s3a://` as Hadoop's S3A names the same object) is read and
    written with S3FileSystem, a local one with LocalFileSystem, unless a filesystem is given.
    """

    def __init__(self, raw_root: str | Path, filesystem: RegistryFileSystem | None = None) -> None:
        root = str(raw_root).rstrip("/")
        self.raw_root = root
        self.location = f"{root}/{REGISTRY_FOLDER}"
        if filesystem is None:
            scheme = url_scheme(root)
            if scheme is not None and scheme not in S3_SCHEMES:
                # Taken for a local path, `gs://b/raw` would become a folder named `gs:`.
                raise ValueError(f"{root!r}: the contract registry is kept on S3 (s3://, s3a://) or on a local "
                                 "disk, not under a URL of another scheme")
            filesystem = S3FileSystem() if scheme in S3_SCHEMES else LocalFileSystem()
        self._files = filesystem

    def raw_tables(self) -> list[str]:
        """Raw tables with at least one registered version."""
        return [name for name in self._files.list(self.location) if not name.startswith(".")]

    def entries(self, raw_table: str) -> list[dict[str, Any]]:
        """Every registered version of a raw table, oldest first."""
        folder = f"{self.location}/{raw_table}"
        entries = []
        for name in self._files.list(folder):
            # Hidden names are temporary files of a write that never finished.
            if name.startswith(".") or not name.endswith(".json"):
                continue
            path = f"{folder}/{name}"
            try:
                entries.append(json.loads(self._files.read_text(path)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: registered contract is not valid JSON: {exc}") from exc
        return sorted(entries, key=lambda entry: entry["sequence"])

    def latest(self, raw_table: str) -> dict[str, Any] | None:
        entries = self.entries(raw_table)
        return entries[-1] if entries else None

    def holds_rows(self, raw_table: str) -> bool:
        """Whether the raw table (current state or change log) was ever written: anything in its folders."""
        return any(self._files.list(f"{self.raw_root}/{name}") for name in (raw_table, raw_table + CHANGES_SUFFIX))

    def register(self, contract: TableContract, now: datetime) -> str:
        """Record the contract's version (once: a version already registered is left as it is)."""
        if now.tzinfo is None:
            raise ValueError("register needs a timezone-aware time")
        version = contract_version(contract)
        entries = self.entries(contract.raw_table)
        if any(entry["version"] == version for entry in entries):
            return version
        entry = {
            **schema_document(contract),
            "version": version,
            "sequence": entries[-1]["sequence"] + 1 if entries else 1,
            "registered_at": now.isoformat(),
        }
        path = f"{self.location}/{contract.raw_table}/{version}.json"
        self._files.write_text(path, json.dumps(entry, indent=2) + "\n")
        log.info("registered contract version %s of raw table %s at %s", version, contract.raw_table, path)
        return version


def check_contracts(
    registry: ContractRegistry,
    contracts: Mapping[str, TableContract],
    *,
    report: Callable[[str], None] = log.info,
) -> None:
    """Check every contract against its raw table's latest registered version.

    `contracts` is what `load_contracts` returns. One ContractEvolutionError lists every
    refused table. A registered version of a raw table that holds no rows binds nothing
    (module docstring): the contract replaces it, and the replacement is reported.
    Allowed changes are passed to `report`, one line each. An edit of descriptions, pii or
    casts alone keeps the version, so the registered document keeps the old text and the
    edit is reported again at every start until a column is added. Nothing is registered
    here: a start registers (`register_contracts`) only once Spark has planned every raw
    table, so a start that dies before that leaves no version behind to bind the next one.
    """
    claimed = {contract.raw_table for contract in contracts.values()}
    reports = _removed_entities(registry, contracts.values(), claimed)
    replaced = []
    for contract in contracts.values():
        previous = registry.latest(contract.raw_table)
        if previous is None and not contract.is_routed:
            previous = _registered_under_other_name(registry, contract, claimed)
        if previous is None:
            continue
        if registry.holds_rows(previous["raw_table"]):
            reports.append(evolution_changes(previous, contract))
        elif document_version(previous) != contract_version(contract):
            replaced.append(f"raw table {contract.raw_table!r}: registered contract {document_version(previous)} of "
                            f"raw table {previous['raw_table']!r} was never written to; contract "
                            f"{contract_version(contract)} replaces it")
    refused = [evolution for evolution in reports if not evolution.allowed]
    if refused:
        raise ContractEvolutionError(refused)
    for line in replaced:
        report(line)
    for evolution in reports:
        for change in (*evolution.additions, *evolution.harmless):
            report(f"raw table {evolution.raw_table!r} contract {evolution.previous_version} -> "
                   f"{evolution.current_version}: {change}")


def register_contracts(
    registry: ContractRegistry, contracts: Mapping[str, TableContract], now: datetime
) -> dict[str, str]:
    """Register every contract `check_contracts` passed; returns each raw table's version."""
    return {contract.raw_table: registry.register(contract, now) for contract in contracts.values()}


def _removed_entities(
    registry: ContractRegistry, contracts: Iterable[TableContract], claimed: set[str]
) -> list[EvolutionReport]:
    """A refusal for each registered entity, with rows, of a single-table design still
    streamed whose contract no longer declares it."""
    routed_tables = {contract.table for contract in contracts if contract.is_routed}
    removed = []
    for raw_table in registry.raw_tables():
        entry = registry.latest(raw_table)
        if raw_table in claimed or entry is None or entry["table"] not in routed_tables:
            continue
        if registry.holds_rows(raw_table):
            removed.append(EvolutionReport(
                table=entry["table"], raw_table=raw_table, previous_version=document_version(entry),
                current_version="(none)",
                refused=(f"entity removed: no contract of table {_quote(entry['table'])} declares raw table "
                         f"{_quote(raw_table)} any more, yet the items it holds are current there",),
            ))
    return removed


def _registered_under_other_name(
    registry: ContractRegistry, contract: TableContract, claimed: set[str]
) -> dict[str, Any] | None:
    """The latest entry of a raw table no contract claims any more that came from the same DynamoDB table."""
    for raw_table in registry.raw_tables():
        if raw_table in claimed:
            continue
        entry = registry.latest(raw_table)
        if entry is not None and entry["table"] == contract.table:
            return entry
    return None
