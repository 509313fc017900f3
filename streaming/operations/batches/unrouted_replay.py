"""`lakehouse unrouted replay`: route a single-table design's unrouted items again, once its
contract names their entity.

An item that matches no entity of its table's contract lands in the unrouted raw table
(`<table>_unrouted`) with its whole change record in `_change_record`
(streaming.pipeline.routing). Once the contract learns the entity, a replay feeds those
change records through the stream's own `Pipeline.process_batch` as one batch, with the
current contracts: the decoder routes each as it routes a stream record, so there is one
routing function. The changes a replay reads are the unrouted change log's arrived
changes, oldest to newest, so the entity gets the item's whole history:

* a change the decoder now routes to an entity lands there (or, when it does not fit the
  entity's attributes, in the quarantine with its reason, to be replayed from there);
* a change that still matches no entity stays where it is, untouched: the replay writes
  nothing of it to the unrouted table. What else it lands (the tombstone of an item that
  moved from an entity to an unknown kind, routing.py) is written once, and remembered;
* each re-routed item stops being current in the unrouted table: the replay lands a
  tombstone (a REMOVE row, `_change_record` null, eventID `rerouted:<ordering value>`)
  for each key whose latest unrouted change it re-routed.

The tombstone is made as the decoder makes the tombstone of a move, by
streaming.pipeline.decode.tombstone_columns, here beside the change it retires: its
`_ordering_value` is the re-routed change's V followed by `-`. Readers keep the row with
the greatest ordering value ("greatest wins", streaming.pipeline.ordering), so the
tombstone wins over the change it retires. It also loses to every later real change of
the key: an ordering value is fixed-width digits (event time, sequence number) and then
the eventID's hex digits or `~` and a hash (envelope._tie_breaker), so a real value
greater than V either differs from V within V's length, and then from V+`-` in the same
place, or continues V with a hex digit, which sorts after `-`. Nothing real sorts
between V and V+`-`. Should the item's kind become unknown again, its next change lands
in the unrouted table above the tombstone and is current there again.

Which rows of an unrouted change log are arrived changes: those with a `_change_record`
(a replay's tombstones have none), except the tombstone the decoder lands when an item
moves from the unrouted table to an entity: a deletion whose change record is a MODIFY.
The change itself is in the entity's table already.

Exactly once, as the quarantine's replays: each is a recorded one-off batch
(streaming/operations/batches/recorded_batch.py). A change is identified by its `_ordering_value`
(two distinct changes never share one, copies of one change always do). Each replay gets
a negative batch id of its own, and its run log,
`<data root>/unrouted_replays/<replay-id>.json`, names the changes it reads before
anything lands. A replay that did not finish is resumed by the next one with the same
changes and batch id (the sinks replace what the interrupted attempt wrote). A change
that a succeeded replay re-routed is never read again; what a replay landed for a change
that stays unrouted is never landed again. A replay that re-routes and lands nothing
leaves no run log.

A reprocess needs no repeat of these replays: it decodes the retained landing files with
the current contracts, which route these items directly.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.contracts.model import CHANGE_RECORD_COLUMN, TableContract, contracts_of_table
from streaming.contracts.spark_schema import raw_schema
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.formats.registry import register_change_log
from streaming.io.layout import DataLayout
from streaming.io.sinks import SinkName
from streaming.operations.batches.recorded_batch import UNROUTED_REPLAYS, one_off_batch, recording, run_batch
from streaming.pipeline.batch import as_change_log_rows
from streaming.pipeline.decode import tombstone_columns
from streaming.pipeline.sink_capabilities import SinkCapabilities

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streaming.pipeline.batch import Pipeline, RawSink


Printer = Callable[[str], None]


class UnroutedReplayError(OperatorError, RuntimeError):
    """An unrouted replay cannot run, or its result does not add up."""


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class UnroutedRow:
    """One row of an unrouted change log, as a replay needs it."""

    raw_table: str
    keys: tuple[Any, ...]
    partition: str | None
    ordering_value: str
    event_ts: datetime
    sequence_number: str | None
    is_deleted: bool
    change_record: str | None
    record_event_name: str | None
    batch_id: int

    @property
    def is_arrived_change(self) -> bool:
        """A change that landed here, not a tombstone of a replay or of a move (module docstring)."""
        if self.change_record is None:
            return False
        return not (self.is_deleted and self.record_event_name != "REMOVE")


def unrouted_contracts(contracts: Mapping[str, TableContract], table: str | None = None) -> list[TableContract]:
    """The unrouted raw tables, of one DynamoDB table or of all."""
    found = [contract for contract in contracts.values() if contract.unrouted and table in (None, contract.table)]
    if table is not None and not found:
        routed = sorted({contract.table for contract in contracts.values() if contract.unrouted})
        known = sorted({contract.table for contract in contracts.values()})
        if table not in known:
            raise UnroutedReplayError(
                f"no such table {table!r}: no contract describes it (tables: {', '.join(known) or 'none'}; "
                f"with entities: {', '.join(routed) or 'none'})"
            )
        raise UnroutedReplayError(
            f"table {table!r} has no unrouted items: its contract declares no entities "
            f"(tables with entities: {', '.join(routed) or 'none'})"
        )
    return found


def read_unrouted_rows(raw_root: Path, contract: TableContract) -> list[UnroutedRow]:
    """Every row of an unrouted table's change log, oldest ordering value first, read by
    its raw format (a Parquet change log's files, or a table's snapshot)."""
    import duckdb

    keys = len(contract.key_columns)
    key_columns = ", ".join(f'"{column}"' for column in contract.key_columns)
    with duckdb.connect() as connection:
        if not register_change_log(connection, "unrouted_changes", raw_layout.change_log_dir(raw_root, contract)):
            return []
        connection.execute("set TimeZone = 'UTC'")
        rows = connection.execute(
            f"select {key_columns}, \"{contract.partition_column}\", _ordering_value, _event_ts, "
            f"_sequence_number, _is_deleted, {CHANGE_RECORD_COLUMN}, "
            f"json_extract_string({CHANGE_RECORD_COLUMN}, '$.eventName'), _batch_id "
            "from unrouted_changes order by _ordering_value"
        ).fetchall()
    return [
        UnroutedRow(contract.raw_table, tuple(row[:keys]), partition, ordering_value,
                    event_ts if event_ts.tzinfo else event_ts.replace(tzinfo=timezone.utc),
                    sequence_number, bool(is_deleted), change_record, record_event_name, batch_id)
        for row in rows
        for (partition, ordering_value, event_ts, sequence_number, is_deleted, change_record, record_event_name,
             batch_id) in [row[keys:]]
    ]


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class UnroutedReplayPlan:
    data_root: Path
    replay_id: str
    batch_id: int
    tables: tuple[str, ...]
    # Per unrouted raw table, every row of its change log but this replay's own batch.
    rows: Mapping[str, tuple[UnroutedRow, ...]]
    # The arrived changes this replay decodes again, one per ordering value.
    changes: tuple[UnroutedRow, ...]
    # Per raw table, changes whose rows earlier replays landed there although the change
    # stayed unrouted: never landed there again.
    landed_before: Mapping[str, frozenset[str]]
    resumed: bool = False

    @property
    def run_log(self) -> Path:
        return UNROUTED_REPLAYS.path(self.data_root, self.replay_id)

    def describe(self) -> list[str]:
        per_table = {table: sum(change.raw_table == table for change in self.changes) for table in self.rows}
        return [
            f"{'resume unfinished' if self.resumed else 'replay'} {self.replay_id}: "
            + ", ".join(f"{table}={count}" for table, count in per_table.items())
            + f" unrouted changes through the pipeline as batch {self.batch_id}",
        ]


def plan_replay(data_root: Path, contracts: Mapping[str, TableContract], table: str | None = None) -> UnroutedReplayPlan:
    """The unrouted changes to decode again; an unfinished replay is resumed first, as it was."""
    succeeded = UNROUTED_REPLAYS.succeeded(data_root)
    rerouted = _rerouted(succeeded)
    landed_before: dict[str, set[str]] = {}
    for run in succeeded:
        for raw_table, values in run["landed_for_unrouted"].items():
            landed_before.setdefault(raw_table, set()).update(values)
    frozen_landed = {raw_table: frozenset(values) for raw_table, values in landed_before.items()}
    run = UNROUTED_REPLAYS.interrupted(data_root)
    if run is not None:
        batch_id = run["batch_id"]
        rows = _rows_of(data_root, unrouted_contracts(contracts), batch_id, run["tables"])
        wanted = set(run["changes"])
        by_value = {row.ordering_value: row for table_rows in rows.values() for row in table_rows
                    if row.is_arrived_change and row.ordering_value in wanted}
        missing = wanted - set(by_value)
        if missing:
            raise UnroutedReplayError(
                f"unfinished unrouted replay {run['replay_id']} read {len(missing)} change(s) that are no longer in "
                f"the unrouted tables; its batch {batch_id} cannot be repeated as it was"
            )
        return UnroutedReplayPlan(data_root, run["replay_id"], batch_id, tuple(run["tables"]), rows,
                                  tuple(by_value[value] for value in run["changes"]), frozen_landed, resumed=True)
    selected = unrouted_contracts(contracts, table)
    tables = tuple(sorted({contract.table for contract in selected}))
    # The batch id depends on the replay id, which depends on the changes: read them
    # first with no batch of this replay to leave out (none has been written).
    rows = _rows_of(data_root, selected, None, tables)
    changes = _distinct_changes(row for table_rows in rows.values() for row in table_rows
                                if row.is_arrived_change and row.ordering_value not in rerouted)
    replay_id = UNROUTED_REPLAYS.next_run_id(data_root, (change.ordering_value for change in changes))
    return UnroutedReplayPlan(data_root, replay_id, UNROUTED_REPLAYS.batch_id(replay_id), tables, rows, changes,
                              frozen_landed)


def changes_to_route(data_root: Path, contract: TableContract) -> int:
    """The distinct changes that arrived in the unrouted table of `contract` and no succeeded
    replay re-routed, as the next replay counts them: no tombstone of a replay or of a move,
    each change once however often it was delivered (`lakehouse status` prints it)."""
    import duckdb

    with duckdb.connect() as connection:
        if not register_change_log(connection, "unrouted_changes", raw_layout.change_log_dir(DataLayout(data_root).raw,
                                                                                             contract)):
            return 0
        # UnroutedRow.is_arrived_change in SQL: only the ordering values leave DuckDB.
        arrived = connection.execute(
            f"select distinct _ordering_value from unrouted_changes where {CHANGE_RECORD_COLUMN} is not null and not "
            f"(_is_deleted and json_extract_string({CHANGE_RECORD_COLUMN}, '$.eventName') is distinct from 'REMOVE')"
        ).fetchall()
    rerouted = _rerouted(UNROUTED_REPLAYS.succeeded(data_root))
    return sum(value not in rerouted for (value,) in arrived)


def _rerouted(succeeded: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ordering values of the changes succeeded replays re-routed: never read again."""
    return {value for run in succeeded for value in run["rerouted"]}


def _rows_of(
    data_root: Path, contracts: Iterable[TableContract], own_batch: int | None, tables: Sequence[str]
) -> dict[str, tuple[UnroutedRow, ...]]:
    raw_root = DataLayout(data_root).raw
    return {
        contract.raw_table: tuple(row for row in read_unrouted_rows(raw_root, contract) if row.batch_id != own_batch)
        for contract in contracts
        if contract.table in tables
    }


def _distinct_changes(rows: Iterable[UnroutedRow]) -> tuple[UnroutedRow, ...]:
    """One row per ordering value (copies of a change share it), in ordering-value order."""
    first: dict[str, UnroutedRow] = {}
    for row in rows:
        first.setdefault(row.ordering_value, row)
    return tuple(sorted(first.values(), key=lambda row: row.ordering_value))


# --------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class UnroutedReplayResult:
    replay_id: str
    batch_id: int
    changes: int
    rerouted: int
    quarantined: int
    still_unrouted: int
    tombstones: int
    landed: dict[str, int]

    def summary(self) -> str:
        landed = " ".join(f"{table}={rows}" for table, rows in sorted(self.landed.items()) if rows)
        return (f"unrouted replay {self.replay_id} batch={self.batch_id}: changes={self.changes} "
                f"rerouted={self.rerouted} (landed {landed or 'nothing'}; quarantined={self.quarantined}) "
                f"still unrouted={self.still_unrouted} tombstones={self.tombstones}")


class _ReroutingSink:
    """The raw sink of a replay's pipeline: lands what the decoder routes to an entity
    (less what an earlier replay landed already for a change that stayed unrouted), and
    writes nothing to the unrouted tables, whose changes are there already; notes which
    changes landed where."""

    # It collects what it lands table by table, one write at a time, reading the changes twice.
    capabilities = SinkCapabilities()

    def __init__(self, sink: RawSink, landed_before: Mapping[str, frozenset[str]]) -> None:
        self.sink = sink
        self.landed_before = landed_before
        self.still_unrouted: set[str] = set()
        self.landed: dict[str, list[str]] = {}

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        from pyspark.sql import functions as F

        if contract.unrouted:
            # A change's row here is the change itself, or the tombstone of its item moving to an
            # entity: a deletion whose record is not a REMOVE (module docstring).
            arrived = ~(F.col("_is_deleted") & (F.get_json_object(CHANGE_RECORD_COLUMN, "$.eventName") != "REMOVE"))
            self.still_unrouted |= {row[0] for row in changes.where(arrived).select("_ordering_value").collect()}
            return
        before = self.landed_before.get(contract.raw_table)
        if before:
            changes = changes.where(~F.col("_ordering_value").isin(sorted(before)))
        landed = [row[0] for row in changes.select("_ordering_value").collect()]
        self.landed[contract.raw_table] = landed
        self.sink.write(changes, contract, batch_id, rows=len(landed))


def replayed_contracts(contracts: Mapping[str, TableContract], tables: Iterable[str]) -> dict[str, TableContract]:
    """The contracts of the DynamoDB `tables` (each entity's and the unrouted one), by raw table."""
    return {name: contract for table in tables for name, contract in contracts_of_table(contracts, table).items()}


def run_replay(
    spark: SparkSession,
    plan: UnroutedReplayPlan,
    contracts: Mapping[str, TableContract],
    sink: RawSink,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> UnroutedReplayResult:
    """Decode the plan's changes as one batch, land what they route to entities, retire
    the re-routed items from the unrouted tables, and record the run."""
    started_at = clock()
    identity = {"replay_id": plan.replay_id, "batch_id": plan.batch_id, "tables": list(plan.tables),
                "changes": [change.ordering_value for change in plan.changes], "started_at": started_at.isoformat()}
    table_contracts = replayed_contracts(contracts, plan.tables)
    rerouting = _ReroutingSink(sink, plan.landed_before)
    with recording(plan.run_log, identity) as run:
        # The source names where the change is kept: its unrouted change log and ordering value.
        records = [(change.change_record, f"{table_contracts[change.raw_table].changes_table}#{change.ordering_value}")
                   for change in plan.changes]
        report, quarantined_rows = run_batch(spark, records, plan.batch_id, table_contracts, rerouting,
                                             plan.data_root, clock=lambda: started_at)
        record_values = {change.change_record: change.ordering_value for change in plan.changes}
        quarantined = {record_values[row.payload] for row in quarantined_rows if row.payload in record_values}
        if report.records_in != len(plan.changes) or report.quarantined != len(quarantined):
            raise UnroutedReplayError(
                f"unrouted replay {plan.replay_id}: read {report.records_in} of {len(plan.changes)} changes, "
                f"quarantined {report.quarantined} rows of which {len(quarantined)} are its changes"
            )
        rerouted = {change.ordering_value for change in plan.changes} - rerouting.still_unrouted
        tombstones = _write_tombstones(spark, plan, table_contracts, sink, rerouted, started_at)
    landed_for_unrouted = {
        raw_table: sorted(set(values) & rerouting.still_unrouted)
        for raw_table, values in rerouting.landed.items()
        if set(values) & rerouting.still_unrouted
    }
    result = UnroutedReplayResult(
        plan.replay_id, plan.batch_id, len(plan.changes), len(rerouted), len(quarantined),
        len(rerouting.still_unrouted), tombstones,
        {raw_table: len(values) for raw_table, values in rerouting.landed.items()},
    )
    if not rerouted and not landed_for_unrouted:
        # Nothing landed anywhere: no run to remember, and the next replay reads the same changes.
        run.forget()
    else:
        run.succeeded(rerouted=sorted(rerouted), quarantined=sorted(quarantined),
                      landed_for_unrouted=landed_for_unrouted, landed_rows=result.landed, tombstones=tombstones,
                      finished_at=clock().isoformat())
    return result


def _write_tombstones(
    spark: SparkSession,
    plan: UnroutedReplayPlan,
    contracts: Mapping[str, TableContract],
    sink: RawSink,
    rerouted: set[str],
    ingested_at: datetime,
) -> int:
    """Land, in each unrouted table, a tombstone for every key whose latest change there
    this replay re-routed (and is not a deletion already); returns how many."""
    written = 0
    for raw_table, rows in plan.rows.items():
        contract = contracts[raw_table]
        latest: dict[tuple[Any, ...], UnroutedRow] = {}
        for row in rows:
            latest[row.keys] = row  # rows come in ordering-value order
        retired = [row for row in latest.values() if row.ordering_value in rerouted and not row.is_deleted]
        frame = _tombstone_frame(spark, contract, retired)
        sink.write(as_change_log_rows(frame, contract, ingested_at, plan.batch_id), contract, plan.batch_id,
                   rows=len(retired))
        written += len(retired)
    return written


def _tombstone_frame(spark: SparkSession, contract: TableContract, retired: Sequence[UnroutedRow]) -> DataFrame:
    """The tombstones' rows in the unrouted table's raw columns (the pipeline's columns aside)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = raw_schema(contract)
    # What a tombstone takes from the change it retires; the partition is the change's own.
    taken = (*contract.key_columns, contract.partition_column, "_event_ts", "_sequence_number", "_ordering_value")
    changes = spark.createDataFrame(
        [(*row.keys, row.partition, row.event_ts, row.sequence_number, row.ordering_value) for row in retired],
        T.StructType([schema[name] for name in taken]),
    ).withColumn("_source_table", F.lit(contract.table))
    keys = {column: F.col(column) for column in contract.key_columns}
    return changes.select(*tombstone_columns(contract, keys, beside_change=True), contract.partition_column)


# --------------------------------------------------------------------------- `lakehouse unrouted`


@dataclass(frozen=True)
class UnroutedReplay:
    """`lakehouse unrouted replay` as a one-off batch (recorded_batch.OneOffBatch): the
    unrouted changes of one table or of all, or an unfinished replay's."""

    table: str | None

    command = "unrouted replay"
    reads_existing_data = True
    errors = (UnroutedReplayError,)

    def plan(self, target: DataLayout, contracts: Mapping[str, TableContract]) -> UnroutedReplayPlan:
        return plan_replay(target.root, contracts, self.table)

    def nothing_to_do(self, plan: UnroutedReplayPlan) -> list[str]:
        return [] if plan.changes else ["nothing to replay"]

    def describe(self, plan: UnroutedReplayPlan) -> list[str]:
        return plan.describe()

    def written_contracts(
        self, plan: UnroutedReplayPlan, contracts: Mapping[str, TableContract]
    ) -> Mapping[str, TableContract]:
        """The replayed tables' raw tables alone, all that run_replay decodes and writes."""
        return replayed_contracts(contracts, plan.tables)

    def retry_heading(self, plan: UnroutedReplayPlan) -> str:
        return f"unrouted replay failed (run it again: it resumes batch {plan.batch_id})"

    def run(self, spark: SparkSession, plan: UnroutedReplayPlan, pipeline: Pipeline,
            out: Printer) -> UnroutedReplayResult:
        result = run_replay(spark, plan, pipeline.contracts, pipeline.sink)
        out(result.summary())
        # A replay that landed nothing removed its run log (run_replay), so only a kept one is named.
        out(f"      run log {plan.run_log}" if plan.run_log.exists()
            else "nothing landed, so no run log is kept: the next replay reads the same changes")
        return result


def unrouted_replay(
    layout: DataLayout,
    *,
    table: str | None = None,
    sink: SinkName | None = None,
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> UnroutedReplayResult | None:
    """`lakehouse unrouted replay`: the unrouted changes through the pipeline again with the
    current contracts, exactly once; None when there are none."""
    return one_off_batch(layout, UnroutedReplay(table), sink=sink, contracts_dir=contracts_dir, spark=spark, out=out)
