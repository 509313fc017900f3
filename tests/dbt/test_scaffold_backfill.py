"""A scaffolded table behaves as the hand-written customers models on the same raw rows
(issue 30, items 12 and 2): a copy of the project gets a contract `people` shaped like
`customers`, `scaffold --history` writes its models, both change logs get the same
changes and backfilled export snapshots, and one `dbt build` of both compares them.

- The history makes a snapshot a version only where it shows what the events did not
  (the key's first known state, the item back after a REMOVE, values the stream missed),
  never a copy of the version before it that would cut that version's valid_to short.
- The change events mark snapshots (`_is_snapshot`), so counts of INSERTs leave them out
  as int_customers__change_events does.
- A registration date that does not fit its cast warns, naming the column, in both."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from dbt_scenario import DAY_1, DAY_2, EVENT_WINDOW
from project_copy import copy_contracts, copy_project

from streaming.contracts.loader import CONTRACTS_DIR_ENV, SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.operations.scaffold import scaffold
from streaming.runtime.dbt_runner import failure_summary, run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

PEOPLE_CONTRACT = (SAMPLE_CONTRACTS_DIR / "customers.yml").read_text(encoding="utf-8").replace(
    "table: customers ", "table: people    ").replace("raw_table: customers ", "raw_table: people    ")
# The hand-written models and their scaffolded twins; their tests come with them.
COMPARED_MODELS = ("stg_dynamodb__customers", "stg_dynamodb__customers_changes", "int_customers__change_events",
                   "dim_customers_history", "stg_dynamodb__people", "stg_dynamodb__people_changes", "dim_people_history")
DATE = "2024-03-01T00:00:00Z"
EXPORTED = DAY_2 + timedelta(hours=2)


def _change(key: str, email: str | None, hours: float, event: str = "INSERT", date: str | None = DATE, **extra) -> dict:
    row = {"id": key, "cust_name": key.upper(), "_event_name": event, "_event_ts": DAY_1 + timedelta(hours=hours),
           "sequence": int(hours * 10), **extra}
    return row if event == "REMOVE" else {**row, "email": email, "registration_date": date}


def _snapshot(key: str, email: str) -> dict:
    """An export line as `lakehouse backfill` lands it: an INSERT with an `export:` eventID."""
    return {"id": key, "cust_name": key.upper(), "email": email, "registration_date": DATE, "_event_name": "INSERT",
            "_event_ts": EXPORTED, "sequence": 0, "_event_id": f"export:test/{key}"}


STREAM = [
    _change("k1", "a@example.com", 1), _change("k1", "b@example.com", 2, "MODIFY"),
    _change("k3", "a@example.com", 1),
    _change("k4", "a@example.com", 1), _change("k4", None, 2, "REMOVE"),
    _change("k5", "a@example.com", 1, date="not a date"),
    # After the export: the key first known from its snapshot changes again.
    _change("k2", "c@example.com", 30, "MODIFY"),
]
SNAPSHOTS = [
    _snapshot("k1", "b@example.com"),  # repeats k1's MODIFY: no version
    _snapshot("k2", "a@example.com"),  # the key's first known state: a version
    _snapshot("k3", "z@example.com"),  # a value the stream missed: a version
    _snapshot("k4", "a@example.com"),  # back after its REMOVE: a version
]


@pytest.fixture(scope="module")
def both_built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("scaffold_backfill")
    project = copy_project(root / "project")
    contracts_dir = copy_contracts(root / "contracts", {"people.yml": PEOPLE_CONTRACT})
    data_dir = root / "data"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONTRACTS_DIR_ENV, str(contracts_dir))
        contracts = load_contracts()
        scaffold("people", project_dir=project, contracts=contracts, history=True)
        for table in ("customers", "people"):
            contract = contracts[table]
            write_raw_batch(data_dir, table, 0, STREAM[:6], DAY_1 + timedelta(hours=3), contract=contract)
            write_raw_batch(data_dir, table, -1, SNAPSHOTS, EXPORTED + timedelta(minutes=5), contract=contract)
            write_raw_batch(data_dir, table, 1, STREAM[6:], DAY_2 + timedelta(hours=7), contract=contract)
        result = run_dbt(["build", "--project-dir", str(project), "--profiles-dir", str(project), *EVENT_WINDOW,
                          "--select", *COMPARED_MODELS, "--indirect-selection", "cautious"], data_dir)
    return {"data_dir": data_dir, "result": result}


def _query(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_both_build_and_a_bad_cast_warns_by_its_column(both_built: dict) -> None:
    result = both_built["result"]
    assert result.exception is None, result.exception
    statuses = {node.node.name: str(node.status) for node in result.result}
    assert result.success, failure_summary(result)
    # k5's registration date `not a date` does not fit the cast timestamp.
    assert {name: status for name, status in statuses.items() if status not in {"success", "pass"}} == {
        "fits_contract_cast_stg_dynamodb__customers_registration_date": "warn",
        "fits_contract_cast_stg_dynamodb__people_registration_date": "warn",
    }


def test_the_scaffolded_history_makes_the_versions_the_hand_written_one_makes(both_built: dict) -> None:
    columns = "version_number, {snapshot}, valid_from, valid_to, is_current, is_deleted, registration_date"
    customers = _query(both_built["data_dir"], f"""
        select customer_id, {columns.format(snapshot="version_event_name = 'SNAPSHOT'")}
        from lakehouse_marts.dim_customers_history order by 1, 2""")
    people = _query(both_built["data_dir"], f"""
        select id, {columns.format(snapshot="_is_snapshot")}
        from lakehouse_marts.dim_people_history order by 1, 2""")

    assert people == customers
    versions = {(key, number): (snapshot, valid_to) for key, number, snapshot, _, valid_to, *_ in people}
    exported = EXPORTED.replace(tzinfo=None)
    # k1's snapshot repeats its MODIFY: that version goes on, current, uncut.
    assert [versions[("k1", n)] for n in (1, 2)] == [(False, (DAY_1 + timedelta(hours=2)).replace(tzinfo=None)),
                                                      (False, None)]
    assert ("k1", 3) not in versions
    assert versions[("k2", 1)] == (True, (DAY_1 + timedelta(hours=30)).replace(tzinfo=None))
    assert versions[("k3", 2)] == (True, None) and versions[("k4", 2)] == (True, None)
    assert versions[("k3", 1)][1] == exported


def test_the_scaffolded_change_events_mark_snapshots_so_inserts_count_as_the_hand_written_ones(both_built: dict) -> None:
    data_dir = both_built["data_dir"]
    (hand_written,) = _query(data_dir, "select count(*) filter (where event_name = 'INSERT'), count(*) "
                                       "from lakehouse_intermediate.int_customers__change_events")
    (scaffolded,) = _query(data_dir, "select count(*) filter (where _event_name = 'INSERT' and not _is_snapshot), "
                                     "count(*) filter (where not _is_snapshot), count(*) filter (where _is_snapshot) "
                                     "from lakehouse_staging.stg_dynamodb__people_changes")
    assert scaffolded == (*hand_written, len(SNAPSHOTS)) == (4, 7, 4)
