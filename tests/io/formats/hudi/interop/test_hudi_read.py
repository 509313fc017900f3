"""Reading raw Hudi tables written by the real sink (Spark + Hudi 1.0.2) without Spark:
snapshots through hudi-rs across a contract evolution, as-of reads of an earlier
commit, and `lakehouse status` on a Hudi data directory.

One data directory is written once for the module (each Hudi write costs seconds):
customers gets two micro-batches, the first under a contract without
`registrationDate` (an attribute added later, so the older files lack its column);
app_unrouted gets one live item and one tombstone.
"""
from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from lakehouse_dbt.hudi_raw import read_hudi_snapshot
from streaming.cli import main
from streaming.contracts.loader import load_contracts
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi.sink import HudiSink
from streaming.io.formats.hudi.timeline import LocalFiles, completed_instants, table_commits
from streaming.io.formats.parquet.format import PARQUET
from streaming.io.formats.registry import format_on_disk
from streaming.io.layout import DataLayout
from streaming.operations.status import status
from streaming.runtime.dbt_runner import DbtFailed, run_dbt_command, with_dbt_var

CONTRACTS = load_contracts()
STREAM_ID = "s"


def _change(schema, values: dict, ordering_time: str, batch_id: int, hour: str) -> tuple:
    row = {name: None for name in schema.fieldNames()}
    row.update(
        _event_name="MODIFY", _is_deleted=False, _is_ttl_delete=False,
        _ordering_value=ordering_time + "0" * 64, _ingested_at=datetime(2026, 4, 4, int(hour[-2:]), tzinfo=timezone.utc),
        _batch_id=batch_id, _ingest_hour=hour,
    )
    row.update(values)
    return tuple(row[name] for name in schema.fieldNames())


def _customer(cust_id: str, email: str, ordering_time: str, **more) -> dict:
    return dict(id=cust_id, cust_name="Ana", email=email, id_suffix=cust_id[-1], _event_id=f"e-{cust_id}-{email}",
                _source_table="customers", **more)


def _write(spark, sink: HudiSink, contract, batch_id: int, hour: str, rows: list[tuple[dict, str]]) -> None:
    schema = change_log_schema(contract)
    frame = spark.createDataFrame([_change(schema, values, time, batch_id, hour) for values, time in rows], schema)
    sink.write(frame, contract, batch_id)


@pytest.fixture(scope="module")
def hudi_data_dir(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose raw tables the Hudi sink wrote (the tests that use it take
    `hudi_spark`, which fails them when the Hudi bundle is missing)."""
    data_dir = tmp_path_factory.mktemp("hudi_data")
    sink = HudiSink(str(data_dir / "raw"), "raw", CONTRACTS, sync_mode="none", stream_id=STREAM_ID)
    customers = CONTRACTS["customers"]
    before_registration = dataclasses.replace(
        customers, attributes=tuple(spec for spec in customers.attributes if spec.column != "registration_date"))
    _write(spark, sink, before_registration, 0, "2026-04-04-08", [
        (_customer("c1", "old@x", "t"), "20260404080000000000"),
        (_customer("c1", "new@x", "t"), "20260404080100000000"),
    ])
    # Another ingest hour and another key partition: new files, not a rewrite of the old ones.
    _write(spark, sink, customers, 1, "2026-04-04-09", [
        (_customer("c2", "b@x", "t", registration_date="2026-01-02"), "20260404090000000000"),
    ])
    unrouted = CONTRACTS["app_unrouted"]
    item = dict(tenant_bucket="t1", _source_table="app", _change_record="{}")
    _write(spark, sink, unrouted, 0, "2026-04-04-08", [
        (dict(pk="X#1", sk="A", _event_id="u1", **item), "20260404080000000000"),
        (dict(pk="X#2", sk="A", _event_id="u2", **item), "20260404080000000000"),
        (dict(pk="X#2", sk="A", _event_id="u3", _event_name="REMOVE", _is_deleted=True, **item),
         "20260404080500000000"),
    ])
    return data_dir


def test_snapshot_reads_a_column_added_later_as_null_in_older_files(hudi_spark, hudi_data_dir: Path) -> None:
    def rows(table: str) -> list[tuple]:
        snapshot = read_hudi_snapshot(str(hudi_data_dir / "raw" / table))
        return sorted((row["id"], row["email"], row["registration_date"]) for row in snapshot.to_pylist())

    assert rows("customers_changes") == [("c1", "new@x", None), ("c1", "old@x", None), ("c2", "b@x", "2026-01-02")]
    assert rows("customers") == [("c1", "new@x", None), ("c2", "b@x", "2026-01-02")]


def _instants(data_dir: Path, table: str) -> list[str]:
    return [commit.instant for commit in table_commits(LocalFiles(), str(data_dir / "raw" / table))]


def test_as_of_the_first_commit_reads_the_first_state(hudi_spark, hudi_data_dir: Path) -> None:
    changes, current = hudi_data_dir / "raw" / "customers_changes", hudi_data_dir / "raw" / "customers"
    first, second = _instants(hudi_data_dir, "customers")

    def emails(table: Path, as_of: str) -> list[tuple]:
        return sorted((row["id"], row["email"]) for row in read_hudi_snapshot(str(table), as_of=as_of).to_pylist())

    assert emails(current, first) == [("c1", "new@x")]
    assert emails(current, second) == [("c1", "new@x"), ("c2", "b@x")]
    # One instant serves every table: the change log's first commit came before `first`.
    assert emails(changes, first) == [("c1", "new@x"), ("c1", "old@x")]
    assert read_hudi_snapshot(str(current), as_of="20000101000000000").num_rows == 0
    with pytest.raises(ValueError, match="not a Hudi instant"):
        read_hudi_snapshot(str(current), as_of="yesterday")


def test_status_of_a_hudi_data_dir_counts_snapshots_and_batch_commits(hudi_spark, hudi_data_dir: Path) -> None:
    report = status(DataLayout(hudi_data_dir))
    assert report.change_rows["customers"] == 3
    assert report.current_rows["customers"] == 2
    assert report.raw_batches["customers"] == 2
    # The unrouted current state holds X#1 and the tombstone of X#2: one live item.
    assert (report.change_rows["app_unrouted"], report.current_rows["app_unrouted"]) == (3, 2)
    assert report.unrouted_items == {"app_unrouted": 1}
    assert report.change_rows["orders"] == report.current_rows["orders"] == report.raw_batches["orders"] == 0
    assert [(c.operation, c.inserted, c.batch_marker) for c in report.commits["customers_changes"]] == [
        ("INSERT", 2, "s:0"), ("INSERT", 1, "s:1")]
    assert [c.operation for c in report.commits["customers"]] == ["UPSERT", "UPSERT"]
    newest = report.commit_lines(newest=1)
    first, second = _instants(hudi_data_dir, "customers_changes")
    assert "customers_changes: 2 commits, newest:" in newest
    assert any(line.split()[:2] == [second, "INSERT"] for line in newest)
    assert not any(first in line for line in newest)


def test_lakehouse_status_prints_the_newest_commits(hudi_data_dir: Path, capsys) -> None:
    from streaming.cli import main

    assert main(["status", "--data-dir", str(hudi_data_dir)]) == 0
    printed = capsys.readouterr().out
    _, second = _instants(hudi_data_dir, "customers_changes")
    assert "customers_changes: 2 commits, newest:" in printed
    assert any(line.split()[:2] == [second, "INSERT"] for line in printed.splitlines())


def test_a_data_dir_given_as_a_relative_path_is_read_and_its_status_printed(hudi_data_dir: Path, monkeypatch,
                                                                           capsys) -> None:
    from streaming.cli import main

    # As `make demo` gives it (./data); hudi-rs alone refuses a relative path.
    monkeypatch.chdir(hudi_data_dir.parent)
    relative = Path(hudi_data_dir.name) / "raw" / "customers"
    assert read_hudi_snapshot(str(relative)).num_rows == 2
    assert main(["status", "--data-dir", hudi_data_dir.name]) == 0
    assert "customers_changes: 2 commits, newest:" in capsys.readouterr().out


def test_dbt_reads_a_hudi_data_dir_without_a_flag(hudi_spark, hudi_data_dir: Path) -> None:
    run_dbt_command(hudi_data_dir, ["run", "--select", "stg_dynamodb__customers"])
    with duckdb.connect(str(hudi_data_dir / "lakehouse.duckdb"), read_only=True) as con:
        staged = con.sql("select id, registration_date from lakehouse_staging.stg_dynamodb__customers order by id")
        assert staged.fetchall() == [("c1", None), ("c2", datetime(2026, 1, 2))]
        # The current-state source is the Hudi upsert table itself, as Athena reads it,
        # without Hudi's meta columns.
        [(definition,)] = con.sql("select sql from duckdb_views() where schema_name = 'raw' "
                                  "and view_name = 'customers'").fetchall()
        assert definition.rstrip(";").endswith("FROM raw_hudi.customers") and "qualify" not in definition.lower()
        current = con.sql("select * from raw.customers order by id")
        assert [row[:3] for row in current.fetchall()] == [("c1", "Ana", "new@x"), ("c2", "Ana", "b@x")]
        columns = [column for column, *_ in con.sql("describe raw.customers").fetchall()]
        change_log_columns = [column for column, *_ in con.sql("describe raw.customers_changes").fetchall()]
    assert not [name for name in columns + change_log_columns if name.startswith("_hoodie_")]
    assert columns == [name for name in change_log_columns if name != "_ingest_hour"]


def test_dbt_raw_as_of_builds_from_an_earlier_commit(hudi_spark, hudi_data_dir: Path) -> None:
    first, _ = _instants(hudi_data_dir, "customers")
    args = ["run", "--select", "stg_dynamodb__customers", "--full-refresh"]
    run_dbt_command(hudi_data_dir, args, raw_as_of=first)
    with duckdb.connect(str(hudi_data_dir / "lakehouse.duckdb"), read_only=True) as con:
        assert con.sql("select id, email from lakehouse_staging.stg_dynamodb__customers").fetchall() == [
            ("c1", "new@x")]
    with pytest.raises(DbtFailed, match="not a Hudi instant"):
        run_dbt_command(hudi_data_dir, args, raw_as_of="2026-04-04")


def test_raw_as_of_is_refused_on_a_parquet_change_log(tmp_path: Path) -> None:
    # What the Parquet sink leaves: batch folders, no `.hoodie` timeline.
    (tmp_path / "raw" / "customers_changes" / "_ingest_hour=2026-04-04-08" / "_batch_id=0").mkdir(parents=True)
    with pytest.raises(DbtFailed, match="holds none"):
        run_dbt_command(tmp_path, ["run"], raw_as_of="20260404080000000")
    assert format_on_disk(tmp_path / "raw") is PARQUET


def test_the_raw_format_joins_the_last_vars_of_the_command() -> None:
    assert with_dbt_var(["run"], "raw_format", "hudi") == ["run", "--vars", '{"raw_format": "hudi"}']
    merged = with_dbt_var(["build", "--vars", "{a: 1}", "--vars", "{b: 2}"], "raw_format", "hudi")
    assert merged[:3] == ["build", "--vars", "{a: 1}"] and json.loads(merged[4]) == {"raw_format": "hudi", "b": 2}
    # A raw_format the operator gives wins.
    assert json.loads(with_dbt_var(["--vars={raw_format: parquet}"], "raw_format", "hudi")[0].split("=", 1)[1]) == {
        "raw_format": "parquet"}


def test_lakehouse_dbt_takes_raw_as_of_out_of_dbts_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr("streaming.runtime.dbt_runner.run_dbt_command",
                        lambda data_dir, args, **options: calls.append((list(args), options)))
    assert main(["dbt", "show", "--select", "stg_dynamodb__customers", "--raw-as-of", "20260404080000000",
                 "--data-dir", str(tmp_path)]) == 0
    assert calls == [(["show", "--select", "stg_dynamodb__customers"],
                      {"raw_as_of": "20260404080000000", "contracts_dir": None})]


def test_the_freshness_bench_sees_a_hudi_change_logs_keys_once_committed(hudi_spark, hudi_data_dir: Path) -> None:
    from benchmarks.freshness import HudiRawWatcher

    watcher = HudiRawWatcher(hudi_data_dir / "raw", contracts=CONTRACTS)
    watcher.poll()

    # Both committed batches of the customers' change log; orders has no table yet.
    assert set(watcher.first_seen) == {("c1", "customers"), ("c2", "customers")}


def _with_newest_commit_emptied(hudi_data_dir: Path, tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A copy of the customers change log whose newest completed commit file is empty, as
    Hudi leaves it for a moment while it writes the commit's metadata on a local disk."""
    import shutil

    table = tmp_path / "customers_changes"
    shutil.copytree(hudi_data_dir / "raw" / "customers_changes", table)
    newest = table / ".hoodie" / completed_instants(LocalFiles(), str(table))[-1]
    written = newest.read_bytes()
    newest.write_bytes(b"")
    return table, newest, written


def test_a_snapshot_read_waits_for_a_commit_file_being_written(hudi_spark, hudi_data_dir: Path, tmp_path: Path) -> None:
    import threading

    table, newest, written = _with_newest_commit_emptied(hudi_data_dir, tmp_path)
    threading.Timer(0.3, newest.write_bytes, [written]).start()

    assert sorted(read_hudi_snapshot(str(table), columns=["id"]).column("id").to_pylist()) == ["c1", "c1", "c2"]


def test_a_commit_file_left_empty_fails_the_read_after_the_retries(
    hudi_spark, hudi_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakehouse_dbt import hudi_raw

    monkeypatch.setattr(hudi_raw, "COMMIT_BEING_WRITTEN_WAIT_S", 0.01)
    table, _, _ = _with_newest_commit_emptied(hudi_data_dir, tmp_path)

    with pytest.raises(Exception, match=hudi_raw.COMMIT_BEING_WRITTEN):
        read_hudi_snapshot(str(table))


def _copy_of(hudi_data_dir: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(hudi_data_dir, copy, ignore=shutil.ignore_patterns("lakehouse.duckdb*", "dbt"))
    return copy


def _first_commit_left_in_flight(table: Path) -> None:
    """The table as a writer killed in its first commit leaves it: the first instant
    requested and inflight with its data files written, and no completed commit. The
    sink wrote it; what came after that first commit's completion is taken away."""
    first, *later = [commit.instant for commit in table_commits(LocalFiles(), str(table))]
    for completed in completed_instants(LocalFiles(), str(table)):
        (table / ".hoodie" / completed).unlink()
        (table / ".hoodie" / f".{completed}.crc").unlink(missing_ok=True)
    for path in [path for path in table.rglob("*") if path.is_file()]:
        if any(instant in path.name for instant in later):
            path.unlink()
    assert [path.name for path in (table / ".hoodie").glob(f"{first}.*")] != []


def test_a_table_whose_first_commit_is_in_flight_reads_as_not_there(hudi_spark, hudi_data_dir: Path, tmp_path: Path,
                                                                     capsys) -> None:
    data_dir = _copy_of(hudi_data_dir, tmp_path)
    for table in ("customers_changes", "customers"):
        _first_commit_left_in_flight(data_dir / "raw" / table)

    assert read_hudi_snapshot(str(data_dir / "raw" / "customers")) is None
    assert read_hudi_snapshot(str(data_dir / "raw" / "customers"), as_of="20990101000000000") is None
    report = status(DataLayout(data_dir))
    assert (report.change_rows["customers"], report.current_rows["customers"], report.raw_batches["customers"]) == (
        0, 0, 0)
    assert report.commits["customers_changes"] == () and report.unrouted_items == {"app_unrouted": 1}
    assert main(["status", "--data-dir", str(data_dir)]) == 0
    assert "customers_changes: 0 commits" in capsys.readouterr().out

    lines: list[str] = []
    run_dbt_command(data_dir, ["run", "--select", "stg_dynamodb__customers"], report=lines.append)
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from lakehouse_staging.stg_dynamodb__customers").fetchall() == [(0,)]
    assert "raw table customers: no commit of it has completed yet" in "\n".join(lines)

    # Read as empty, the raw side lacks every row the written one holds: a mismatch, not a crash.
    assert main(["reconcile", "--source", str(hudi_data_dir / "raw"), "--target", str(data_dir / "raw"),
                 "--table", "customers", "--data-dir", str(data_dir)]) == 1


def _newest_commit_cut_short(table: Path) -> None:
    """The table with its newest completed commit file cut in half (a copy or a disk that
    failed part way): its timeline no longer parses."""
    newest = table / ".hoodie" / completed_instants(LocalFiles(), str(table))[-1]
    written = newest.read_bytes()
    newest.write_bytes(written[: len(written) // 2])


def _schema_nested_too_deep(table: Path) -> None:
    """The table's newest writer schema (in its newest commit, where readers take it) with a
    field nested 40 levels, as a DynamoDB map nested 31 levels deep gives: deeper than the
    JSON recursion hudi-rs parses an Avro schema with."""
    newest = table / ".hoodie" / completed_instants(LocalFiles(), str(table))[-1]
    metadata = json.loads(newest.read_text())
    schema = json.loads(metadata["extraMetadata"]["schema"])
    nested: object = "string"
    for level in range(40):
        nested = ["null", {"type": "record", "name": f"level{level}", "fields": [
            {"name": "m", "type": nested, "default": None}]}]
    schema["fields"].append({"name": "deep", "type": nested, "default": None})
    metadata["extraMetadata"]["schema"] = json.dumps(schema)
    newest.write_text(json.dumps(metadata))


@pytest.mark.parametrize("damage", [_newest_commit_cut_short, _schema_nested_too_deep])
def test_a_raw_table_hudi_rs_cannot_read_stops_neither_the_other_tables_nor_status(
    hudi_spark, hudi_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, damage
) -> None:
    from lakehouse_dbt import hudi_raw

    monkeypatch.setattr(hudi_raw, "COMMIT_BEING_WRITTEN_WAIT_S", 0.01)
    data_dir = _copy_of(hudi_data_dir, tmp_path)
    damage(data_dir / "raw" / "customers_changes")

    lines: list[str] = []
    run_dbt_command(data_dir, ["run", "--select", "stg_dynamodb__orders"], report=lines.append)
    [left_out] = [line for line in lines if "customers_changes" in line]
    assert "hudi-rs cannot read this Hudi table" in left_out and "lakehouse reprocess" in left_out
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from lakehouse_staging.stg_dynamodb__orders").fetchall() == [(0,)]
        # The readable tables were loaded; the current state of customers too, though its
        # models fail with its change log.
        assert con.sql("select count(*) from raw_hudi.customers").fetchall() == [(2,)]
    # The unreadable table's own models fail, by name, and are not read as empty.
    with pytest.raises(DbtFailed, match="stg_dynamodb__customers"):
        run_dbt_command(data_dir, ["run", "--select", "stg_dynamodb__customers"], report=lines.append)

    assert main(["status", "--data-dir", str(data_dir)]) == 0
    printed = capsys.readouterr().out.splitlines()
    [unreadable] = [line for line in printed if line.startswith("unreadable: ")]
    assert unreadable.startswith("unreadable: customers: ") and "customers_changes" in unreadable
    assert any(line.split()[:2] == ["app_unrouted", "3"] for line in printed)


def test_a_raw_as_of_that_is_no_time_is_refused_before_the_loaded_tables_are_touched(
    hudi_spark, hudi_data_dir: Path, tmp_path: Path
) -> None:
    data_dir = _copy_of(hudi_data_dir, tmp_path)
    run_dbt_command(data_dir, ["run", "--select", "stg_dynamodb__customers"], report=lambda line: None)

    # Month 13: digits of the right length, but no moment.
    with pytest.raises(DbtFailed, match="not a Hudi instant"):
        run_dbt_command(data_dir, ["show", "--select", "stg_dynamodb__customers"], raw_as_of="20261399999999999")
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from raw.customers").fetchall() == [(2,)]


def test_a_stream_killed_in_a_tables_first_commit_leaves_it_read_as_empty(hudi_spark, tmp_path: Path) -> None:
    import signal

    from cli_processes import LakehouseProcess

    data_dir = tmp_path / "data"
    assert main(["generate", "--data-dir", str(data_dir), "--customers", "5"]) == 0

    def first_commit_in_flight() -> Path | None:
        return next((hoodie.parent for hoodie in (data_dir / "raw").glob("*/.hoodie")
                     if any(hoodie.glob("*.inflight")) and not completed_instants(LocalFiles(), str(hoodie.parent))),
                    None)

    stream = LakehouseProcess(["stream", "--data-dir", str(data_dir)], cwd=tmp_path)
    try:
        stream.wait_until(lambda: first_commit_in_flight() is not None, "a table's first commit in flight")
        stream.signal_group(signal.SIGKILL)
    finally:
        stream.stop()
    killed = first_commit_in_flight()
    assert killed is not None and read_hudi_snapshot(str(killed)) is None

    assert main(["status", "--data-dir", str(data_dir)]) == 0
    lines: list[str] = []
    run_dbt_command(data_dir, ["run", "--select", "stg_dynamodb__customers"], report=lines.append)
    assert f"raw table {killed.name}: no commit of it has completed yet" in "\n".join(lines)
