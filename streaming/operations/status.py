"""`lakehouse status`: row counts of the local raw tables, the unrouted items, the values that
did not fit their contract cast (in the staging tables of the last dbt build) and the quarantine.

Each raw format counts its own tables, without Spark (RawFormat.count in
streaming/io/formats/): a Parquet change log with DuckDB, its current state derived
(distinct keys); the default format's change log and stored current state as they are,
with the commits of each."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from streaming.contracts.model import TableContract
from streaming.errors import OperatorError
from streaming.io.duckdb_files import duckdb_glob_literal
from streaming.io.firehose_error_output import error_output_warnings
from streaming.io.formats.raw_format import RawCommit, UnreadableRawTable
from streaming.io.formats.registry import format_to_read
from streaming.io.landing_ledger import changed_files
from streaming.io.layout import DataLayout, is_switched, require_data_dir
from streaming.operations.batches.recorded_batch import unfinished_operations
from streaming.operations.batches.unrouted_replay import changes_to_route
from streaming.runtime.startup import load_checked_contracts


@dataclass(frozen=True)
class StatusReport:
    # Per raw table: rows of its change log, rows of its current state (keys, tombstones
    # included), and the change log's batches (Parquet: batch folders; a format with
    # commits: those carrying a batch marker).
    change_rows: dict[str, int]
    current_rows: dict[str, int]
    raw_batches: dict[str, int]
    quarantine_by_reason: dict[str, int]
    # Set when `lakehouse switch` pointed readers away from the data directory.
    active_root: str | None = None
    # Warnings for landing files modified after the stream read them.
    landing_changes: tuple[str, ...] = ()
    # Warnings for Firehose error output below the landing folder, which the stream skips.
    error_output: tuple[str, ...] = ()
    # Warnings for the backfills and replays that failed or were stopped before they finished.
    unfinished_operations: tuple[str, ...] = ()
    # Per unrouted raw table (single-table designs): the items current there, which match
    # no entity of the contract, the distinct changes that arrived there and no replay
    # re-routed (its change log also holds the replays' tombstones), and the DynamoDB
    # table they belong to.
    unrouted_items: dict[str, int] = field(default_factory=dict)
    unrouted_changes: dict[str, int] = field(default_factory=dict)
    unrouted_tables: dict[str, str] = field(default_factory=dict)
    # A format with commits only: each table's completed commits (change log `<t>_changes`
    # and current state `<t>`), oldest first. A Parquet change log has no commits.
    commits: dict[str, tuple[RawCommit, ...]] = field(default_factory=dict)
    # Per staging model the last dbt build wrote, per column with a contract cast: the rows
    # whose value did not fit it (_cast_misfits); or why they were not counted.
    cast_misfits: dict[str, dict[str, int]] = field(default_factory=dict)
    cast_misfits_not_counted: str | None = None
    # Per raw table whose format's reader refused one of its tables: why, and what to do.
    # It has no counts; every other table has.
    unreadable: dict[str, str] = field(default_factory=dict)
    # Said before the counts: that the tables are the samples, fallen back on for want of the user's own.
    contracts_notices: tuple[str, ...] = ()

    def commit_lines(self, newest: int = 3) -> list[str]:
        """Each table's newest commits: instant, operation, rows written, batch."""
        out = []
        for table, commits in self.commits.items():
            out.append(f"{table}: {len(commits)} commits" + (", newest:" if commits else ""))
            out += [f"  {commit.instant}  {commit.operation or commit.action:<7} {commit.inserted:>6} inserted "
                    f"{commit.updated:>6} updated" + (f"  batch {commit.batch_marker}" if commit.batch_marker else "")
                    for commit in reversed(commits[-newest:])]
        return out

    def _cast_misfit_lines(self) -> list[str]:
        """The columns holding values that did not fit their contract cast, and the total."""
        if self.cast_misfits_not_counted is not None:
            return [f"cast misfits: not counted, {self.cast_misfits_not_counted}"]
        misfits = {f"{model}.{column}": rows for model, columns in self.cast_misfits.items()
                   for column, rows in columns.items() if rows}
        where = f"in the {len(self.cast_misfits)} staging tables with casts of the last dbt build"
        if not misfits:
            return [f"cast misfits: none {where}"]
        out = [f"cast misfits: {sum(misfits.values())} rows hold a value that does not fit its contract cast "
               f"(null, its text in <column>_text), {where}:"]
        width = max(len(column) for column in misfits)
        return out + [f"  {column:<{width}}  {rows:>6}" for column, rows in misfits.items()]

    def lines(self) -> list[str]:
        width = max([len(table) for table in self.change_rows] + [len("raw table")])
        out = list(self.contracts_notices)
        out += [f"active data root: {self.active_root}"] if self.active_root else []
        out += [f"{'raw table':<{width}}  {'change log':>10}  {'current':>8}  {'batches':>7}"]
        out += [
            f"{table:<{width}}  {rows:>10}  {self.current_rows[table]:>8}  {self.raw_batches[table]:>7}"
            for table, rows in self.change_rows.items()
        ]
        out += [f"unreadable: {raw_table}: {problem}" for raw_table, problem in self.unreadable.items()]
        for raw_table, items in self.unrouted_items.items():
            out.append(f"unrouted: {items} items in {raw_table} match no entity of table "
                       f"{self.unrouted_tables[raw_table]}'s contract ({self.unrouted_changes[raw_table]} changes)"
                       + (f"; once the contract names their entity: lakehouse unrouted replay "
                          f"--table {self.unrouted_tables[raw_table]}" if items else ""))
        out += self._cast_misfit_lines()
        total = sum(self.quarantine_by_reason.values())
        out.append(f"quarantine: {total} rows" + (":" if total else ""))
        out += [f"  {reason:<40} {rows:>6}" for reason, rows in sorted(self.quarantine_by_reason.items())]
        out += [f"WARNING: {warning}"
                for warning in (*self.landing_changes, *self.error_output, *self.unfinished_operations)]
        return out


def status(layout: DataLayout, *, contracts_dir: str | None = None) -> StatusReport:
    """Row counts of the local raw change logs, their current state and the quarantine."""
    import duckdb

    require_data_dir(layout.root)
    notices: list[str] = []
    contracts = load_checked_contracts(contracts_dir, report=notices.append)
    data_dir = layout.root
    layout = layout.active()
    change_rows: dict[str, int] = {}
    current_rows: dict[str, int] = {}
    raw_batches: dict[str, int] = {}
    unrouted_items: dict[str, int] = {}
    commits: dict[str, tuple[RawCommit, ...]] = {}
    unreadable: dict[str, str] = {}
    raw_format = format_to_read(layout.raw)
    with duckdb.connect() as connection, _naming_unreadable_parquet(layout):
        for contract in contracts.values():
            try:
                counts = raw_format.count(connection, layout.raw, contract)
            except UnreadableRawTable as exc:
                unreadable[contract.raw_table] = str(exc)
                continue
            change_rows[contract.raw_table], current_rows[contract.raw_table] = counts.change_rows, counts.current_rows
            raw_batches[contract.raw_table] = counts.batches
            commits.update(counts.commits)
            if contract.unrouted:
                unrouted_items[contract.raw_table] = counts.live_items
        unrouted_changes = {contract.raw_table: changes_to_route(layout.root, contract)
                            for contract in contracts.values()
                            if contract.unrouted and contract.raw_table not in unreadable}
        quarantine_files = layout.quarantine_files()
        by_reason: dict[str, int] = {}
        if quarantine_files:
            rows = connection.execute(
                "select reason, count(*) from read_parquet(?) group by reason",
                [[duckdb_glob_literal(path) for path in quarantine_files]],
            ).fetchall()
            by_reason = {reason: count for reason, count in rows}
    cast_misfits, not_counted = _cast_misfits(DataLayout(data_dir).dbt_database, contracts)
    changes = tuple(changed.warning() for changed in changed_files(layout.landing_ledger))
    return StatusReport(change_rows, current_rows, raw_batches, by_reason,
                        str(layout.root) if is_switched(data_dir) else None, changes,
                        tuple(error_output_warnings(DataLayout(data_dir).landing)),
                        tuple(unfinished_operations(layout.root)), unrouted_items, unrouted_changes,
                        {contract.raw_table: contract.table for contract in contracts.values() if contract.unrouted},
                        commits, cast_misfits, not_counted, unreadable, tuple(notices))


# The schema of the staging models in the local DuckDB file (profiles.yml's schema and
# dbt_project.yml's +schema, joined by dbt).
STAGING_SCHEMA = "lakehouse_staging"


def _cast_misfits(database: Path, contracts: Mapping[str, TableContract]) -> tuple[dict[str, dict[str, int]], str | None]:
    """Per staging model of a raw table with casts that the last dbt build wrote
    (`stg_dynamodb__<raw_table>`, hand-written or scaffolded), per cast column (a map
    field's is `<column>__<field>`, scaffold.staging_cast_columns): the rows
    whose value did not fit the cast, typed null with its text kept in `<column>_text`,
    which is what the dbt test fits_contract_cast counts. Read from the built tables rather
    than raw: staging is where the casts are applied, exactly (counting raw would repeat
    every cast's rules in Python), and the tables hold one row per key, so the count is one
    scan of each; it is as of that build. None but the reason when there is nothing to read."""
    import duckdb

    from streaming.operations.scaffold import staging_cast_columns

    if not database.is_file():
        return {}, "no dbt build in this data directory yet (lakehouse dbt build)"
    counts: dict[str, dict[str, int]] = {}
    try:
        with duckdb.connect(str(database), read_only=True) as connection:
            built = {name for (name,) in connection.execute(
                "select table_name from information_schema.tables where table_schema = ?", [STAGING_SCHEMA]).fetchall()}
            for contract in sorted(contracts.values(), key=lambda contract: contract.raw_table):
                model = f"stg_dynamodb__{contract.raw_table}"
                columns = staging_cast_columns(contract)
                if not columns or model not in built:
                    continue
                misfits = ", ".join(f'count(*) filter (where "{column}" is null and "{column}_text" is not null)'
                                    for column in columns)
                row = connection.execute(f'select {misfits} from {STAGING_SCHEMA}."{model}"').fetchone()
                counts[model] = dict(zip(columns, (int(rows) for rows in row)))
    except duckdb.Error as exc:
        # A dbt build holding the file, or a table built before a cast was added.
        return {}, f"cannot read {database}: {str(exc).splitlines()[0]}"
    return counts, None


@contextmanager
def _naming_unreadable_parquet(layout: DataLayout) -> Iterator[None]:
    """Turn DuckDB's failure on a damaged Parquet file (cut short by a crash or a copy)
    into an error that names every unreadable file under raw/ and quarantine/."""
    import duckdb

    try:
        yield
    except duckdb.Error as exc:
        unreadable = []
        with duckdb.connect() as probe:
            for path in sorted([*layout.raw.rglob("*.parquet"), *layout.quarantine.rglob("*.parquet")]):
                try:
                    probe.execute("select count(*) from parquet_metadata(?)", [duckdb_glob_literal(path)]).fetchall()
                except duckdb.Error as problem:
                    unreadable.append(f"  {path}: {str(problem).splitlines()[0]}")
        if not unreadable:
            raise OperatorError(f"cannot count the raw tables: {exc}") from exc
        raise OperatorError(
            f"{len(unreadable)} Parquet file(s) cannot be read:\n" + "\n".join(unreadable)
            + "\nrestore them from a backup, or rebuild the raw tables with `lakehouse reprocess`"
        ) from exc

