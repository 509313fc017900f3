"""Compare a source of truth with a result, table by table, in DuckDB (no JVM).

Both sides become the current state of each table, in the raw column types:

* a DynamoDB full export: its items, parsed from DynamoDB JSON in SQL. The export of
  a single-table design (a contract with entities) is decoded by the stream's own
  decoder instead (Spark), which routes each item to its entity's raw table or the
  unrouted one exactly as the stream does: routing has one implementation
  (streaming.pipeline.routing). Export items the decoder quarantines are reported;
* a raw table of any raw format (streaming/io/formats/): the latest row per key
  by `_ordering_value` (never equal for two distinct changes), tombstones
  dropped;
* a DuckDB table (`<file>.duckdb:<schema>.<table>`): the same when it carries the
  raw metadata columns, otherwise taken as current state.

Per table the report gives row counts (total and per partition), keys missing on
either side, rows whose business columns differ (with the first few keys and
columns), and an order-independent checksum: the sum of one hash per row.
`_extra_attributes` is not compared: its JSON text depends on the writer.

The sample keys go to a terminal and a JSON file, so a key column the contract marks
PII is never shown in clear: it is replaced by its keyed pseudonym, the one the marts
hold for that column in `pii_mode: hash` (macros/pii/pseudonymize.sql), so the row can
still be found there; without a PII key it is withheld.
"""
from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from lakehouse_dbt.pii_key import key_of_data_dir, pseudonym
from streaming.contracts.duckdb_schema import duckdb_type
from streaming.contracts.model import AttributeSpec, TableContract, contracts_of_table
from streaming.contracts.types import DYNAMODB_TYPES, LIST, MAP
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.duckdb_files import duckdb_glob_literal, sql_string
from streaming.io.dynamodb_export import (
    FULL_EXPORT,
    SUMMARY_FILE,
    ExportManifest,
    export_to_change_records,
    read_export_manifest,
)
from streaming.io.formats.registry import format_of_table
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import load_checked_contracts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SAMPLE_SIZE = 5
# Stands for a PII key value when no PII key is available to pseudonymise it.
WITHHELD_PII = "<pii withheld>"
_ROW_HASH = "_row_hash"
_PARTITION = "_partition"


class ReconcileError(OperatorError, ValueError):
    """A side cannot be read or the two sides share no table."""


@dataclass(frozen=True)
class PartitionDiff:
    partition: str | None
    source_rows: int
    target_rows: int
    source_checksum: str
    target_checksum: str


@dataclass
class TableReconciliation:
    table: str
    source_rows: int
    target_rows: int
    source_checksum: str
    target_checksum: str
    missing_in_target: int
    missing_in_source: int
    changed: int
    duplicate_keys: dict[str, int]
    columns_missing: dict[str, list[str]]
    sample_missing_in_target: list[dict[str, Any]] = field(default_factory=list)
    sample_missing_in_source: list[dict[str, Any]] = field(default_factory=list)
    sample_changed: list[dict[str, Any]] = field(default_factory=list)
    partitions_differing: list[PartitionDiff] = field(default_factory=list)
    partitions_compared: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.missing_in_target == 0
            and self.missing_in_source == 0
            and self.changed == 0
            and not any(self.duplicate_keys.values())
            and not any(self.columns_missing.values())
            and not self.partitions_differing
        )

    def lines(self) -> list[str]:
        verdict = "OK" if self.ok else "MISMATCH"
        out = [
            f"{self.table}: {verdict}  rows source={self.source_rows} target={self.target_rows}  "
            f"missing_in_target={self.missing_in_target} missing_in_source={self.missing_in_source} "
            f"changed={self.changed}  partitions={self.partitions_compared} "
            f"(differing {len(self.partitions_differing)})",
        ]
        for side, columns in self.columns_missing.items():
            if columns:
                out.append(f"  {side} lacks columns {columns}")
        for side, count in self.duplicate_keys.items():
            if count:
                out.append(f"  {side} has {count} rows with a repeated key")
        out += [f"  missing in target: {key}" for key in self.sample_missing_in_target]
        out += [f"  missing in source: {key}" for key in self.sample_missing_in_source]
        out += [f"  changed: {row['key']} columns {row['columns']}" for row in self.sample_changed]
        out += [
            f"  partition {diff.partition!r}: rows {diff.source_rows} vs {diff.target_rows}, "
            f"checksum {diff.source_checksum} vs {diff.target_checksum}"
            for diff in self.partitions_differing[:SAMPLE_SIZE]
        ]
        return out


@dataclass
class ReconcileReport:
    source: str
    target: str
    tables: list[TableReconciliation]
    # Export items the decoder quarantines (routed exports only), by reason: they are in
    # no raw table, so the export and raw cannot agree on them.
    export_items_quarantined: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(table.ok for table in self.tables) and not self.export_items_quarantined

    def lines(self) -> list[str]:
        out = [f"reconcile {self.source} -> {self.target}"]
        for table in self.tables:
            out += table.lines()
        if self.export_items_quarantined:
            out.append(f"{sum(self.export_items_quarantined.values())} export items the decoder quarantines:")
            out += [f"  {reason:<40} {rows:>6}" for reason, rows in sorted(self.export_items_quarantined.items())]
        out.append("result: " + ("OK" if self.ok else "MISMATCH"))
        return out

    def to_json(self) -> str:
        document = {"source": self.source, "target": self.target, "ok": self.ok,
                    "tables": [{**asdict(table), "ok": table.ok} for table in self.tables],
                    "export_items_quarantined": self.export_items_quarantined}
        return json.dumps(document, indent=2, default=str)


# --------------------------------------------------------------------------- sides


@dataclass(frozen=True)
class _Side:
    """A side's tables: raw table -> SQL of its current state (None: no data yet).

    `scoped` is False when the side speaks for every contracted table (a raw root).
    """

    description: str
    tables: dict[str, str | None]
    scoped: bool
    quarantined: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Decoding:
    """What a routed export's decoding needs: the caller's Spark session or none (one is
    started), a scratch folder for the decoded rows, and where to say so."""

    spark: SparkSession | None
    scratch: Path
    out: Callable[[str], None]


def _open_side(
    con: duckdb.DuckDBPyConnection, text: str, contracts: Mapping[str, TableContract], alias: str, decoding: _Decoding
) -> _Side:
    by_raw = {contract.raw_table: contract for contract in contracts.values()}
    path = Path(text)
    if path.is_dir() and (path / SUMMARY_FILE).is_file():
        return _export_side(con, path, contracts, decoding)
    if path.is_dir():
        return _raw_side(con, path, by_raw, alias)
    database, _, table = text.rpartition(":")
    if database and Path(database).is_file() and table:
        return _duckdb_side(con, Path(database), table, by_raw, alias)
    raise ReconcileError(
        f"{text!r} is neither an export directory (with {SUMMARY_FILE}), a raw directory, "
        "nor <file>.duckdb:<schema>.<table>"
    )


def _export_side(
    con: duckdb.DuckDBPyConnection, export_dir: Path, contracts: Mapping[str, TableContract], decoding: _Decoding
) -> _Side:
    manifest = read_export_manifest(export_dir)
    if manifest.export_type != FULL_EXPORT:
        raise ReconcileError(f"{export_dir} is an {manifest.export_type}; reconcile against a full export")
    table_contracts = contracts_of_table(contracts, manifest.table_name)
    if not table_contracts:
        raise ReconcileError(f"{export_dir}: no table contract for table {manifest.table_name!r}")
    if any(contract.is_routed for contract in table_contracts.values()):
        return _routed_export_side(manifest, table_contracts, decoding)
    (contract,) = table_contracts.values()
    files = ", ".join(sql_string(duckdb_glob_literal(data_file.path)) for data_file in manifest.data_files)
    columns = [f"{_export_value(spec, _json_member('Item', spec.name))} as {_ident(spec.column)}"
               for spec in contract.attributes]
    body = "select " + ", ".join(columns) + (
        f" from read_json([{files}], format = 'newline_delimited', columns = {{'Item': 'JSON'}})"
        if files else " where false"
    )
    # The partition column is computed as the sink computes it; Spark SQL and DuckDB
    # agree on the string functions partition expressions use (substring, lower, ...).
    state = f"select *, cast({contract.partition_expression} as varchar) as {_ident(contract.partition_column)} " \
            f"from ({body})"
    return _Side(f"export {manifest.export_id} ({manifest.table_name})", {contract.raw_table: state}, True)


def _routed_export_side(
    manifest: ExportManifest, table_contracts: Mapping[str, TableContract], decoding: _Decoding
) -> _Side:
    """Each raw table's current state in a single-table design's export, as the decoder
    routes and types its items: the export's change records (the ones a backfill lands)
    through the stream's decoder, written as Parquet for DuckDB to read."""
    from pyspark.sql import functions as F

    from streaming.io.sources import landing_files_batch
    from streaming.pipeline.decode import decoded_and_kept

    folder = decoding.scratch / manifest.export_id
    records = folder / "records"
    records.mkdir(parents=True)
    any_contract = next(iter(table_contracts.values()))
    with (records / "records.jsonl").open("w", encoding="utf-8") as staged:
        for record in export_to_change_records(manifest.export_dir, any_contract):
            staged.write(record + "\n")
    tables: dict[str, str | None] = {}
    with session_for(decoding.spark, decoding.out) as spark:
        # The quarantine count and each raw table's write all read the decoded records:
        # kept, so that the export's records are split and decoded once, not once per
        # read, and released after, since the caller's session may run on. Rows lost with
        # an executor are not computed again: reconcile fails and is run again.
        with decoded_and_kept(landing_files_batch(spark, str(records)), table_contracts) as (decoded, quarantine):
            quarantined = {row["reason"]: row["rows"]
                           for row in quarantine.groupBy("reason").agg(F.count(F.lit(1)).alias("rows")).collect()}
            for raw_table, rows in decoded.items():
                decoded_dir = folder / "decoded" / raw_table
                rows.write.parquet(str(decoded_dir))
                files = sorted(decoded_dir.glob("*.parquet"))
                listed = ", ".join(sql_string(duckdb_glob_literal(path)) for path in files)
                tables[raw_table] = (
                    _latest_per_key(f"read_parquet([{listed}])", table_contracts[raw_table]) if files else None
                )
    return _Side(f"export {manifest.export_id} ({manifest.table_name})", tables, True, quarantined)


def _raw_side(con: duckdb.DuckDBPyConnection, path: Path, by_raw: Mapping[str, TableContract], alias: str) -> _Side:
    by_folder = {name: contract for contract in by_raw.values() for name in (contract.raw_table, contract.changes_table)}
    if _is_table_dir(path):
        if path.name not in by_folder:
            raise ReconcileError(
                f"{path} is a raw table folder, but no contract has raw_table {path.name!r} "
                f"(or {path.name!r} as its change log <raw_table>_changes)"
            )
        contract = by_folder[path.name]
        return _Side(f"raw table {path}", {contract.raw_table: _raw_table_state(con, path, contract, alias)}, True)
    raw = raw_layout.DataLayout(path).raw
    root = raw if raw.is_dir() and not any((path / name).is_dir() for name in by_folder) else path
    tables = {raw_table: _raw_root_state(con, root, contract, alias) for raw_table, contract in by_raw.items()}
    return _Side(f"raw root {root}", tables, False)


def _is_table_dir(path: Path) -> bool:
    return format_of_table(path) is not None


def _raw_root_state(con: duckdb.DuckDBPyConnection, root: Path, contract: TableContract, alias: str) -> str | None:
    """A table's current state under a raw root: the stored current-state table where
    there is one (production layout), else the change log."""
    for folder in (root / contract.raw_table, root / contract.changes_table):
        if _is_table_dir(folder):
            return _raw_table_state(con, folder, contract, alias)
    return None


def _raw_table_state(con: duckdb.DuckDBPyConnection, table_dir: Path, contract: TableContract, alias: str) -> str | None:
    raw_format = format_of_table(table_dir)
    rows = raw_format.current_state(con, table_dir, alias) if raw_format is not None else None
    return _latest_per_key(rows, contract) if rows is not None else None


def _duckdb_side(
    con: duckdb.DuckDBPyConnection, database: Path, table: str, by_raw: Mapping[str, TableContract], alias: str
) -> _Side:
    name = table.rsplit(".", 1)[-1]
    if name not in by_raw:
        raise ReconcileError(f"{table}: no contract has raw_table {name!r}; name the table after its raw table")
    catalog = f"{alias}_db"
    con.execute(f"attach {sql_string(str(database))} as {catalog} (read_only)")
    relation = f"{catalog}.{table}"
    try:
        columns = {row[0] for row in con.execute(f"describe {relation}").fetchall()}
    except duckdb.Error as exc:
        raise ReconcileError(f"{database}: cannot read table {table}: {exc}") from exc
    contract = by_raw[name]
    if {"_ordering_value", "_is_deleted"} <= columns:
        state = _latest_per_key(relation, contract)
    else:
        state = f"select * from {relation}"
    if contract.partition_column not in columns:
        state = f"select *, cast({contract.partition_expression} as varchar) as {_ident(contract.partition_column)} " \
                f"from ({state})"
    return _Side(f"duckdb {database}:{table}", {name: state}, True)


def _latest_per_key(relation: str, contract: TableContract) -> str:
    keys = ", ".join(_ident(column) for column in contract.key_columns)
    return (
        f"select * from (select * from {relation} qualify row_number() over "
        f"(partition by {keys} order by _ordering_value desc) = 1) "
        "where not coalesce(_is_deleted, false)"
    )


# --------------------------------------------------------------------------- compare


def reconcile(
    source: str,
    target: str,
    contracts: Mapping[str, TableContract],
    *,
    table: str | None = None,
    pii_key: bytes | None = None,
    spark: SparkSession | None = None,
    out: Callable[[str], None] = print,
) -> ReconcileReport:
    """Compare `source` (export dir or raw dir) with `target` (raw dir or DuckDB table).

    `pii_key` pseudonymises the PII key columns of the sample keys (see the module
    docstring); None withholds them. `spark` decodes the export of a single-table
    design (without it, one is started for that, and `out` says so).
    """
    with duckdb.connect() as con, ExitStack() as cleanup:
        con.execute("set TimeZone = 'UTC'")
        decoding = _Decoding(spark, Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="reconcile-"))), out)
        source_side = _open_side(con, source, contracts, "source", decoding)
        target_side = _open_side(con, target, contracts, "target", decoding)
        names = set(source_side.tables) & set(target_side.tables) if source_side.scoped or target_side.scoped \
            else set(source_side.tables)
        if table is not None:
            names &= {table, *(c.raw_table for c in contracts.values() if c.table == table)}
        if not names:
            raise ReconcileError(f"{source_side.description} and {target_side.description} share no table"
                                 + (f" named {table!r}" if table else ""))
        by_raw = {contract.raw_table: contract for contract in contracts.values()}
        results = [
            _compare(con, by_raw[name], source_side.tables[name], target_side.tables[name], pii_key)
            for name in sorted(names)
        ]
    quarantined = {reason: source_side.quarantined.get(reason, 0) + target_side.quarantined.get(reason, 0)
                   for reason in {*source_side.quarantined, *target_side.quarantined}}
    return ReconcileReport(source_side.description, target_side.description, results, quarantined)


def _compare(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    source: str | None,
    target: str | None,
    pii_key: bytes | None,
) -> TableReconciliation:
    columns_missing = {}
    for side, state in (("source", source), ("target", target)):
        columns_missing[side] = _materialise(con, contract, state, side)
    keys = [_ident(column) for column in contract.key_columns]
    join = " and ".join(f"s.{key} = t.{key}" for key in keys)
    key_struct = "struct_pack(" + ", ".join(f"{key} := {{side}}.{key}" for key in keys) + ")"

    def scalar(sql: str) -> Any:
        return con.execute(sql).fetchone()[0]  # type: ignore[index]

    def keys_only_in(left: str, right: str) -> tuple[int, list[dict[str, Any]]]:
        anti = f"from {left} as s where not exists (select 1 from {right} as t where {join})"
        count = scalar(f"select count(*) {anti}")
        rows = con.execute(f"select {key_struct.format(side='s')} {anti} order by all limit {SAMPLE_SIZE}").fetchall()
        return count, [_shown_key(contract, row[0], pii_key) for row in rows]

    missing_in_target, sample_target = keys_only_in("source", "target")
    missing_in_source, sample_source = keys_only_in("target", "source")
    differs = " or ".join(f"s.{_ident(spec.column)} is distinct from t.{_ident(spec.column)}"
                          for spec in contract.attributes) or "false"
    changed_from = f"from source as s join target as t on {join} where {differs}"
    which = "list_filter([" + ", ".join(
        f"case when s.{_ident(spec.column)} is distinct from t.{_ident(spec.column)} then {sql_string(spec.column)} end"
        for spec in contract.attributes
    ) + "], lambda c: c is not null)"
    changed = scalar(f"select count(*) {changed_from}")
    sample_changed = [
        {"key": _shown_key(contract, key, pii_key), "columns": list(columns)}
        for key, columns in con.execute(
            f"select {key_struct.format(side='s')}, {which} {changed_from} order by 1 limit {SAMPLE_SIZE}"
        ).fetchall()
    ]
    partitions = con.execute(
        "with s as (select _partition, count(*) n, sum(_row_hash::hugeint) h from source group by all), "
        "t as (select _partition, count(*) n, sum(_row_hash::hugeint) h from target group by all) "
        "select coalesce(s._partition, t._partition), coalesce(s.n, 0), coalesce(t.n, 0), "
        "coalesce(s.h, 0)::varchar, coalesce(t.h, 0)::varchar "
        "from s full outer join t on s._partition is not distinct from t._partition order by 1"
    ).fetchall()
    differing = [PartitionDiff(*row) for row in partitions if row[1] != row[2] or row[3] != row[4]]
    totals = con.execute(
        "select (select count(*) from source), (select count(*) from target), "
        "(select coalesce(sum(_row_hash::hugeint), 0)::varchar from source), "
        "(select coalesce(sum(_row_hash::hugeint), 0)::varchar from target)"
    ).fetchone()
    duplicates = {
        side: scalar(f"select count(*) - count(distinct ({', '.join(keys)})) from {side}")
        for side in ("source", "target")
    }
    return TableReconciliation(
        table=contract.raw_table,
        source_rows=totals[0],  # type: ignore[index]
        target_rows=totals[1],  # type: ignore[index]
        source_checksum=totals[2],  # type: ignore[index]
        target_checksum=totals[3],  # type: ignore[index]
        missing_in_target=missing_in_target,
        missing_in_source=missing_in_source,
        changed=changed,
        duplicate_keys=duplicates,
        columns_missing=columns_missing,
        sample_missing_in_target=sample_target,
        sample_missing_in_source=sample_source,
        sample_changed=sample_changed,
        partitions_differing=differing,
        partitions_compared=len(partitions),
    )


def _materialise(con: duckdb.DuckDBPyConnection, contract: TableContract, state: str | None, name: str) -> list[str]:
    """Table `name`: canonical business columns, `_partition` and `_row_hash`.

    Returns the business columns the side lacks (compared as nulls, so they show up
    as changed rows too). A side without the table has no rows and so lacks no column:
    its rows missing on the other side tell the difference.
    """
    specs = contract.attributes
    if state is None:
        present: set[str] = set()
        missing = []
        state = "select 1 where false"
    else:
        present = {row[0] for row in con.execute(f"describe {state}").fetchall()}
        missing = [spec.column for spec in specs if spec.column not in present]
    values = [
        f"cast({_canonical(spec, _ident(spec.column)) if spec.column in present else 'null'} "
        f"as {duckdb_type(spec)}) as {_ident(spec.column)}"
        for spec in specs
    ]
    partition = _ident(contract.partition_column) if contract.partition_column in present else "null"
    con.execute(
        f"create or replace temp table {name} as select *, hash({', '.join(_ident(s.column) for s in specs)}) "
        f"as {_ROW_HASH} from (select {', '.join(values)}, cast({partition} as varchar) as {_PARTITION} "
        f"from ({state}))"
    )
    return missing


def _canonical(spec: AttributeSpec, value: str, depth: int = 0) -> str:
    """`value` with set elements sorted: DynamoDB sets have no order to compare."""
    if spec.type == LIST.code:
        assert spec.items is not None  # the contract loader requires items for a list
        item = f"x{depth}"
        return f"list_transform({value}, lambda {item}: {_canonical(spec.items, item, depth + 1)})"
    if spec.type == MAP.code:
        members = ", ".join(f"{_ident(f.column)} := {_canonical(f, f'{value}.{_ident(f.column)}', depth)}"
                            for f in spec.fields)
        return f"case when {value} is null then null else struct_pack({members}) end"
    return f"list_sort({value})" if DYNAMODB_TYPES[spec.type].is_set else value


def _export_value(spec: AttributeSpec, descriptor: str, depth: int = 0) -> str:
    """The raw value of a DynamoDB JSON descriptor (`{"N": "1.5"}`, `{"NULL": true}`, ...)."""
    member = f"json_extract({descriptor}, '$.{spec.type}')"
    if spec.type == LIST.code:
        assert spec.items is not None  # the contract loader requires items for a list
        item = f"l{depth}"
        return f"list_transform(cast({member} as json[]), lambda {item}: {_export_value(spec.items, item, depth + 1)})"
    if spec.type == MAP.code:
        members = ", ".join(
            f"{_ident(f.column)} := {_export_value(f, _json_member(member, f.name), depth)}" for f in spec.fields
        )
        return f"case when {member} is null then null else struct_pack({members}) end"
    kind = DYNAMODB_TYPES[spec.type]
    if kind.is_set:
        # DynamoDB's sets hold strings, numbers or binaries: text in JSON either way.
        texts = f"cast({member} as varchar[])"
        if not kind.is_base64:
            return texts
        item = f"b{depth}"
        return f"list_transform({texts}, lambda {item}: from_base64({item}))"
    if kind.is_base64:
        return f"from_base64(json_extract_string({descriptor}, '$.{spec.type}'))"
    if kind.is_exact_text:
        return f"json_extract_string({descriptor}, '$.{spec.type}')"
    return f"cast({member} as {duckdb_type(spec)})"


def _json_member(json_value: str, name: str) -> str:
    path = '$."' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"json_extract({json_value}, {sql_string(path)})"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _shown_key(contract: TableContract, key: Mapping[str, Any], pii_key: bytes | None) -> dict[str, Any]:
    """A sample key as the report shows it: PII columns pseudonymised or withheld."""
    pii_columns = set(contract.pii_columns)
    return {
        column: value if column not in pii_columns or value is None
        else WITHHELD_PII if pii_key is None
        else "pseudonym:" + pseudonym(pii_key, column, str(value))
        for column, value in key.items()
    }


def check_report_path(path: Path) -> None:
    """The JSON report goes into an existing folder: a typo must not create a tree of folders."""
    if not path.parent.is_dir():
        raise ReconcileError(f"--json {path}: folder {path.parent} does not exist; create it or choose another path")
    if path.is_dir():
        raise ReconcileError(f"--json {path} is a folder; give a file name")


def write_json_report(report: ReconcileReport, path: Path) -> None:
    check_report_path(path)
    path.write_text(report.to_json() + "\n", encoding="utf-8")



class ReconcileMismatch(OperatorError):
    """The two sides differ; the report says where (`lakehouse reconcile` exits 1)."""


def reconcile_and_report(
    source: str,
    target: str,
    *,
    table: str | None = None,
    json_path: Path | None = None,
    contracts_dir: str | None = None,
    data_dir: Path | None = None,
    spark: SparkSession | None = None,
    out: Callable[[str], None] = print,
) -> ReconcileReport:
    """`lakehouse reconcile`: compare source and target per table, print the report (and
    write it as JSON); raises ReconcileMismatch when they differ.

    PII key columns in the samples are shown as the marts' pseudonyms, with the PII key
    of `data_dir` (or env LAKEHOUSE_PII_KEY), or withheld when there is none."""
    contracts = load_checked_contracts(contracts_dir)
    if json_path is not None:
        check_report_path(json_path)
    report = reconcile(source, target, contracts, table=table, pii_key=key_of_data_dir(data_dir), spark=spark, out=out)
    for line in report.lines():
        out(line)
    if json_path is not None:
        write_json_report(report, json_path)
        out(f"report written to {json_path}")
    if not report.ok:
        raise ReconcileMismatch(f"{sum(not t.ok for t in report.tables)} table(s) differ")
    return report
