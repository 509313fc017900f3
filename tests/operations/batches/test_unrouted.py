"""Unrouted items: counted by `lakehouse status`, and routed again, exactly once, after the
contract learns their entity (`lakehouse unrouted replay`).

The scenario: `app` records are streamed with the packaged contract, which knows tenants,
users and invoices; AUDIT# and REPORT# items land in app_unrouted. Then an `audits`
entity (sort key prefix AUDIT#) is added to a copy of the contracts, and the replay routes
the AUDIT# changes, their whole history, into app_audits.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import duckdb
import pytest
from app_items import audit, change_record, tenant, user
from failing_sinks import SinkThatDiesAfterWriting

from streaming.cli import main
from streaming.io.layout import LOCK_FILE, DataLayout
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.operations.batches import unrouted_replay as ops
from streaming.operations.batches.recorded_batch import UNROUTED_REPLAYS
from streaming.operations.status import status
from streaming.operations.stream import stream
from streaming.pipeline.decode import RETIRING_ORDERING_SUFFIX

PACKAGED_CONTRACTS = Path(__file__).resolve().parents[3] / "streaming" / "samples" / "contracts"
AUDITS_ENTITY = """
  audits:
    raw_table: app_audits
    description: What a tenant's users did, sort key AUDIT#<audit id>.
    match:
      sort_key_prefix: "AUDIT#"
    attributes:
      action:
        type: S
        description: What was done.
      actor:
        type: S
        description: The user who did it.
"""
T0 = 1_790_000_000
REPORT = {"pk": {"S": "TENANT#t1"}, "sk": {"S": "REPORT#r1"}, "title": {"S": "Q3"}}
RECORDS = [
    change_record("e-tenant", "INSERT", T0, new=tenant("t1")),
    change_record("e-user", "INSERT", T0 + 1, new=user("t1", "u1")),
    change_record("e-a1-insert", "INSERT", T0 + 2, new=audit("t1", "a1")),
    change_record("e-a1-modify", "MODIFY", T0 + 10, new=audit("t1", "a1", "LOGOUT"), old=audit("t1", "a1")),
    change_record("e-a2-insert", "INSERT", T0 + 3, new=audit("t1", "a2", "EXPORT")),
    change_record("e-a3-insert", "INSERT", T0 + 4, new=audit("t1", "a3")),
    change_record("e-a3-remove", "REMOVE", T0 + 20, old=audit("t1", "a3")),
    # A kind the new contract does not know either: it stays unrouted, untouched.
    change_record("e-report", "INSERT", T0 + 5, new=REPORT),
]
AUDIT_EVENTS = {"e-a1-insert", "e-a1-modify", "e-a2-insert", "e-a3-insert", "e-a3-remove"}


@pytest.fixture(scope="module")
def app_contracts(tmp_path_factory) -> str:
    """The packaged contract of `app` alone (no audits entity): the scenario is about its items
    only, and every further contract would only add its raw tables to each start's plan."""
    folder = tmp_path_factory.mktemp("app_contracts")
    shutil.copy(PACKAGED_CONTRACTS / "app.yml", folder / "app.yml")
    return str(folder)


def landed_records(layout: DataLayout, records: list[str]) -> DataLayout:
    folder = layout.landing / "2026" / "09" / "21" / "00"
    folder.mkdir(parents=True)
    (folder / "cdc-app.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    return layout


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory, app_contracts) -> Path:
    """A data directory streamed with the packaged contract of `app` (no audits entity)."""
    layout = landed_records(DataLayout(tmp_path_factory.mktemp("unrouted") / "data"), RECORDS)
    stream(layout, sink="parquet", contracts_dir=app_contracts, spark=spark, out=lambda _: None)
    return layout.root


@pytest.fixture(scope="module")
def contracts_with_audits(tmp_path_factory) -> str:
    """The packaged contract of `app`, with the audits entity added."""
    folder = tmp_path_factory.mktemp("contracts")
    shutil.copy(PACKAGED_CONTRACTS / "app.yml", folder / "app.yml")
    with (folder / "app.yml").open("a", encoding="utf-8") as app:
        app.write(AUDITS_ENTITY)
    return str(folder)


@pytest.fixture
def data_dir(streamed, tmp_path) -> DataLayout:
    return DataLayout(shutil.copytree(streamed, tmp_path / "data"))


def rows(root: Path, raw_table: str, columns: str = "_event_id") -> list[tuple]:
    files = sorted((root / "raw" / f"{raw_table}_changes").glob("*/*/*.parquet"))
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute(f"select {columns} from read_parquet(?, hive_partitioning = false) order by all",
                           [[str(path) for path in files]]).fetchall()


def current(root: Path, raw_table: str, columns: str = "sk") -> list[tuple]:
    """The items current in a raw table: per key the greatest ordering value, tombstones dropped."""
    files = sorted((root / "raw" / f"{raw_table}_changes").glob("*/*/*.parquet"))
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute(
            f"select {columns} from read_parquet(?, hive_partitioning = false) qualify row_number() over "
            "(partition by pk, sk order by _ordering_value desc) = 1 and not _is_deleted order by all",
            [[str(path) for path in files]]).fetchall()


def files_of(root: Path) -> dict[str, int]:
    """Every file of the data directory but the lock, which each command takes."""
    return {str(path.relative_to(root)): path.stat().st_mtime_ns for path in root.rglob("*")
            if path.is_file() and path.name != LOCK_FILE}


def replay(layout: DataLayout, contracts_dir: str, spark) -> ops.UnroutedReplayResult | None:
    return ops.unrouted_replay(layout, table="app", sink="parquet", contracts_dir=contracts_dir, spark=spark,
                               out=lambda _: None)


def test_status_counts_the_items_no_entity_matches(streamed, capsys):
    report = status(DataLayout(streamed))

    assert current(streamed, "app_unrouted") == [("AUDIT#a1",), ("AUDIT#a2",), ("REPORT#r1",)]
    assert report.unrouted_items == {"app_unrouted": 3}
    assert report.change_rows["app_unrouted"] == 6
    assert main(["status", "--data-dir", str(streamed)]) == 0
    assert ("unrouted: 3 items in app_unrouted match no entity of table app's contract (6 changes); once the "
            "contract names their entity: lakehouse unrouted replay --table app") in capsys.readouterr().out


def test_replay_routes_the_items_the_contract_learned_once_and_retires_them(spark, data_dir, contracts_with_audits):
    root = data_dir.root
    users_before = rows(root, "app_users", "*")

    result = replay(data_dir, contracts_with_audits, spark)

    assert (result.changes, result.rerouted, result.still_unrouted, result.quarantined) == (6, 5, 1, 0)
    # The whole history of each audit item, typed by the new entity.
    assert {event for (event,) in rows(root, "app_audits")} == AUDIT_EVENTS and len(rows(root, "app_audits")) == 5
    assert current(root, "app_audits", "sk, action") == [("AUDIT#a1", "LOGOUT"), ("AUDIT#a2", "EXPORT")]
    # The unrouted table: the REPORT# item is still current, the re-routed items no longer;
    # a3 was deleted already and gets no tombstone.
    assert current(root, "app_unrouted") == [("REPORT#r1",)]
    tombstones = rows(root, "app_unrouted", "sk, _event_id, _ordering_value, _change_record")
    retired = {sk: (event, ordering) for sk, event, ordering, record in tombstones if event.startswith("rerouted:")}
    assert set(retired) == {"AUDIT#a1", "AUDIT#a2"} and result.tombstones == 2
    latest = {sk: max(ordering for s, event, ordering, _ in tombstones if s == sk and event in AUDIT_EVENTS)
              for sk in retired}
    assert {sk: ordering for sk, (_, ordering) in retired.items()} == {sk: value + "-" for sk, value in latest.items()}
    assert [record for _, event, _, record in tombstones if event.startswith("rerouted:")] == [None, None]
    assert rows(root, "app_users", "*") == users_before, "items already routed are not landed again"
    report = status(data_dir)
    assert report.unrouted_items == {"app_unrouted": 1}
    # Issue 30 item 17: the change log holds the 6 changes and the 2 tombstones, but only the
    # REPORT# change is still to route; the re-routed changes and the tombstones are not.
    assert report.change_rows["app_unrouted"] == 8
    assert "unrouted: 1 items in app_unrouted match no entity of table app's contract (1 changes); once the " \
        "contract names their entity: lakehouse unrouted replay --table app" in report.lines()
    (run,) = UNROUTED_REPLAYS.runs(root)
    assert run["status"] == "succeeded" and run["batch_id"] == result.batch_id < 0
    assert len(run["rerouted"]) == 5

    before = files_of(root)
    again = replay(data_dir, contracts_with_audits, spark)

    assert (again.changes, again.rerouted, again.still_unrouted) == (1, 0, 1), "only the REPORT# change is read"
    assert files_of(root) == before, "a second replay changes nothing, not even a run log"


def test_a_replay_that_routes_nothing_names_no_run_log_and_says_so_once(spark, data_dir, app_contracts, caplog):
    # The packaged contract knows no entity of the AUDIT# and REPORT# items: nothing lands,
    # and the run log the replay writes while it runs is removed again.
    printed: list[str] = []
    with caplog.at_level(logging.INFO, logger="streaming"):
        result = ops.unrouted_replay(data_dir, table="app", sink="parquet", contracts_dir=app_contracts,
                                     spark=spark, out=printed.append)

    assert (result.changes, result.rerouted, result.still_unrouted) == (6, 0, 6)
    run_logs = UNROUTED_REPLAYS.directory(data_dir.root)
    assert not run_logs.exists() or not any(run_logs.iterdir())
    assert not any(str(run_logs) in line for line in printed), "no path it never keeps"
    assert printed[-1] == "nothing landed, so no run log is kept: the next replay reads the same changes"
    assert [*printed, *caplog.messages].count(result.summary()) == 1, "printed once, not logged as well"


def test_an_interrupted_replay_is_resumed_with_its_batch_and_lands_once(spark, data_dir, contracts_with_audits):
    from streaming.contracts.loader import load_contracts

    root = data_dir.root
    contracts = load_contracts(contracts_with_audits)
    plan = ops.plan_replay(root, contracts, "app")
    with pytest.raises(OSError):
        ops.run_replay(spark, plan, contracts, SinkThatDiesAfterWriting(LocalParquetSink(str(root))))
    assert json.loads(plan.run_log.read_text())["status"] == "failed"
    assert rows(root, "app_audits"), "the interrupted attempt left rows in raw"
    assert any(line.startswith("WARNING: unrouted replay 0001-") for line in status(data_dir).lines())

    resumed = ops.plan_replay(root, contracts)
    assert resumed.resumed and resumed.batch_id == plan.batch_id and resumed.changes == plan.changes
    replay(data_dir, contracts_with_audits, spark)

    assert sorted(event for (event,) in rows(root, "app_audits")) == sorted(AUDIT_EVENTS), "each change once"
    assert current(root, "app_unrouted") == [("REPORT#r1",)]
    assert [run["status"] for run in UNROUTED_REPLAYS.runs(root)] == ["succeeded"]


def test_a_table_without_entities_has_nothing_unrouted(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    assert main(["unrouted", "replay", "--table", "orders", "--data-dir", str(tmp_path / "data")]) == 2
    assert "table 'orders' has no unrouted items: its contract declares no entities (tables with entities: app)" \
        in capsys.readouterr().err


def test_a_table_no_contract_describes_is_named_as_unknown_with_the_known_tables(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    assert main(["unrouted", "replay", "--table", "nosuch", "--data-dir", str(tmp_path / "data")]) == 2
    assert "no such table 'nosuch': no contract describes it (tables: app, customers, orders; " \
        "with entities: app)" in capsys.readouterr().err


def test_a_tombstone_sorts_after_the_change_it_retires_and_before_any_later_one():
    time, sequence = "20260921000000000000", "0" * 63 + "1"
    retired = time + sequence + "652D61312D696E73657274"  # hex of the eventID e-a1-insert
    tombstone = retired + RETIRING_ORDERING_SUFFIX
    later = [
        retired + "41",  # same time and sequence number, an eventID the retired one's starts
        retired[:-1] + "5",  # same time and sequence number, a greater eventID
        time + "0" * 63 + "2" + "41",  # a later sequence number
        time + sequence + "~" + "0" * 64,  # a record without eventID (its payload's hash)
    ]
    assert all(retired < tombstone < value for value in later)


def hudi_rows(root: Path, raw_table: str, columns: str) -> list[tuple]:
    """A Hudi table's snapshot as hudi-rs reads it (what dbt and Athena read)."""
    from lakehouse_dbt.hudi_raw import read_hudi_snapshot

    table_dir = root / "raw" / raw_table
    if not (table_dir / ".hoodie").is_dir():
        return []
    with duckdb.connect() as con:
        con.register("snapshot", read_hudi_snapshot(str(table_dir)))
        return con.execute(f"select {columns} from snapshot order by all").fetchall()


def test_the_replay_routes_unrouted_items_of_hudi_tables_once(hudi_spark, tmp_path, app_contracts,
                                                              contracts_with_audits):
    # Only the unrouted items: the tenant and the user would cost two Hudi tables that this
    # test never reads.
    routed = {"e-tenant", "e-user"}
    records = [line for line in RECORDS if json.loads(line)["eventID"] not in routed]
    layout = landed_records(DataLayout(tmp_path / "data"), records)
    stream(layout, sink="hudi", contracts_dir=app_contracts, spark=hudi_spark, out=lambda _: None)
    root = layout.root
    assert hudi_rows(root, "app_unrouted", "sk, _is_deleted") == [
        ("AUDIT#a1", False), ("AUDIT#a2", False), ("AUDIT#a3", True), ("REPORT#r1", False)]

    result = ops.unrouted_replay(layout, table="app", contracts_dir=contracts_with_audits, spark=hudi_spark,
                                 out=lambda _: None)

    assert (result.changes, result.rerouted, result.tombstones) == (6, 5, 2)
    assert sorted(event for (event,) in hudi_rows(root, "app_audits_changes", "_event_id")) == sorted(AUDIT_EVENTS)
    # The real current-state tables: the audits typed in their entity, retired where they were.
    assert hudi_rows(root, "app_audits", "sk, action, _is_deleted") == [
        ("AUDIT#a1", "LOGOUT", False), ("AUDIT#a2", "EXPORT", False), ("AUDIT#a3", None, True)]
    assert hudi_rows(root, "app_unrouted", "sk, _is_deleted") == [
        ("AUDIT#a1", True), ("AUDIT#a2", True), ("AUDIT#a3", True), ("REPORT#r1", False)]

    again = ops.unrouted_replay(layout, table="app", contracts_dir=contracts_with_audits, spark=hudi_spark,
                                out=lambda _: None)
    assert (again.changes, again.rerouted) == (1, 0)
    assert len(hudi_rows(root, "app_audits_changes", "_event_id")) == 5, "nothing lands twice"
