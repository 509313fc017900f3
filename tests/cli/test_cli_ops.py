"""Operator mistakes the CLI must survive: a demo over real data, Ctrl-C on a running stream,
a typo in --interval, a truncated Parquet file, options in the natural order; the demo's
mart summary before and after the app mart exists."""
from __future__ import annotations

import json
import shutil
import signal
from datetime import datetime, timezone

import duckdb
import pytest
from cli_processes import LakehouseProcess

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io.layout import DataLayout
from streaming.operations.demo import DEMO_MARKER, prepare_demo_dir, record_demo_output, single_table_lines
from streaming.operations.marts_summary import INVOICED_MART, MARTS, MARTS_SCHEMA, summarize_marts
from streaming.operations.status import status
from streaming.runtime.trigger import checked_interval
from streaming.samples.raw_fixtures import write_raw_batch


def test_demo_refuses_a_data_dir_it_did_not_create(tmp_path, monkeypatch, capsys):
    # docs/dbt.md exports LAKEHOUSE_DATA_DIR for plain dbt; a later `lakehouse demo` must not wipe it.
    real = tmp_path / "warehouse"
    kept = [real / "raw" / "customers_changes" / "_ingest_hour=2026-11-01-00" / "_batch_id=3" / "part-0.parquet",
            real / "checkpoints" / "landing_to_raw" / "commits" / "3", real / "lakehouse.duckdb"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"production data")
    monkeypatch.setenv("LAKEHOUSE_DATA_DIR", str(real))

    assert main(["demo", "--skip-dbt"]) == 2

    err = capsys.readouterr().err
    assert f"{real} is not empty and was not made by `lakehouse demo`" in err
    assert all(path.read_bytes() == b"production data" for path in kept)
    assert not (real / DEMO_MARKER).exists() and not (real / "landing").exists()


@pytest.mark.parametrize("made_by_demo", [False, True])
def test_demo_refuses_a_data_dir_holding_the_local_athena_and_says_what_to_do_instead(tmp_path, capsys, made_by_demo):
    """`make athena-local` on the default data dir, then `lakehouse demo`: the engine's
    catalog would go with the rest of a cleared directory."""
    data_dir = tmp_path / "data"
    if made_by_demo:
        prepare_demo_dir(data_dir)
    engine_files = [data_dir / "athena-local" / "engine.json",
                    data_dir / "athena-local" / "metastore" / "metastore_db" / "service.properties"]
    for path in engine_files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the engine's")

    assert main(["demo", "--skip-dbt", "--data-dir", str(data_dir)]) == 2

    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lakehouse demo: {data_dir} holds the local Athena (athena-local/")
    assert "--data-dir" in err and "lakehouse stream --catalog" in err and "\n" not in err
    assert all(path.read_text() == "the engine's" for path in engine_files)
    assert not (data_dir / "landing").exists()


def test_demo_refuses_its_own_folder_once_it_holds_files_the_demo_did_not_write(tmp_path, capsys):
    demo_dir = tmp_path / "demo"
    assert prepare_demo_dir(demo_dir) == "created"
    demo_written = [demo_dir / "landing" / "2026" / "11" / "01" / "00" / "cdc-000001.jsonl",
                    demo_dir / "raw" / "customers_changes" / "_ingest_hour=2026-11-01-00" / "_batch_id=0" / "p.parquet",
                    demo_dir / "secrets" / "pii_key"]
    for path in demo_written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("written by the demo")
    record_demo_output(demo_dir)  # what the demo does when it ends
    # Later: real data moved in, and the demo's PII key replaced by the team's.
    real = [demo_dir / "landing" / "2026" / "11" / "24" / "09" / "ddb-cdc-1-2026-11-24-09-00-00-0b3c",
            demo_dir / "backfills" / "01793498400000-0dbdece3.json", demo_dir / "replays" / "0001-0123456789ab.json"]
    for path in real:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("real data")
    (demo_dir / "secrets" / "pii_key").write_text("the team's key, 64 hex characters long .........................")
    # dbt rebuilds its own outputs from raw: a `lakehouse dbt build` after the demo blocks nothing.
    (demo_dir / "dbt" / "logs").mkdir(parents=True)
    (demo_dir / "dbt" / "logs" / "dbt.log").write_text("a later dbt run")
    with duckdb.connect(str(demo_dir / "lakehouse.duckdb")) as con:
        con.execute("create schema main_marts; create table main_marts.dim_customers (id varchar)")
    write_manifest(demo_dir, {"model.p.dim_customers": {"resource_type": "model", "schema": "main_marts",
                                                         "name": "dim_customers", "alias": "dim_customers"}})

    assert main(["demo", "--skip-dbt", "--data-dir", str(demo_dir)]) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "holds files the demo did not write (or that changed since): backfills/01793498400000-0dbdece3.json, " \
           "landing/2026/11/24/09/ddb-cdc-1-2026-11-24-09-00-00-0b3c, replays/0001-0123456789ab.json, " \
           "secrets/pii_key. The demo clears only its own files" in err
    assert all(path.read_text() == "real data" for path in real)
    assert (demo_dir / "secrets" / "pii_key").read_text().startswith("the team's key")

    for path in [*real, demo_dir / "secrets" / "pii_key"]:
        path.unlink()
    assert prepare_demo_dir(demo_dir) == "cleared"
    assert sorted(path.name for path in demo_dir.iterdir()) == [DEMO_MARKER, ".lakehouse.lock"]


def write_manifest(data_dir, nodes: dict, sources: dict | None = None) -> None:
    """dbt's manifest of its last run in `data_dir`, with only the fields the demo reads."""
    target = DataLayout(data_dir).dbt_target
    target.mkdir(parents=True, exist_ok=True)
    (target / "manifest.json").write_text(json.dumps({"nodes": nodes, "sources": sources or {}}))


def test_demo_keeps_an_analysis_under_dbt_and_an_analyst_s_table_in_its_database(tmp_path, capsys):
    # Issue 30, item 16: all of dbt/ and the whole database counted as dbt's to rebuild.
    demo_dir = tmp_path / "demo"
    assert prepare_demo_dir(demo_dir) == "created"
    with duckdb.connect(str(demo_dir / "lakehouse.duckdb")) as con:
        con.execute("create schema raw; create view raw.customers as select 1 as id")
    record_demo_output(demo_dir)  # the demo's dbt build made raw.customers
    analysis = demo_dir / "dbt" / "analysis" / "q.sql"
    analysis.parent.mkdir(parents=True)
    analysis.write_text("select 42")

    assert main(["demo", "--skip-dbt", "--data-dir", str(demo_dir)]) == 2
    assert "holds files the demo did not write (or that changed since): dbt/analysis/q.sql." \
        in capsys.readouterr().err

    analysis.unlink()
    with duckdb.connect(str(demo_dir / "lakehouse.duckdb")) as con:
        con.execute("create table main.my_findings as select 1 as n; create schema main_marts; "
                    "create table main_marts.fct_orders (order_id varchar)")
    # A later `lakehouse dbt build` made fct_orders; its manifest says so.
    write_manifest(demo_dir, {"model.p.fct_orders": {"resource_type": "model", "schema": "main_marts",
                                                      "name": "fct_orders", "alias": "fct_orders"}})

    assert main(["demo", "--skip-dbt", "--data-dir", str(demo_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "its database lakehouse.duckdb holds tables or views neither the demo nor dbt made: main.my_findings. " \
        "The demo would delete the database: copy them elsewhere" in err
    with duckdb.connect(str(demo_dir / "lakehouse.duckdb"), read_only=True) as con:
        assert con.execute("select n from main.my_findings").fetchall() == [(1,)]

    with duckdb.connect(str(demo_dir / "lakehouse.duckdb")) as con:
        con.execute("drop table main.my_findings")
    assert prepare_demo_dir(demo_dir) == "cleared"
    assert sorted(path.name for path in demo_dir.iterdir()) == [DEMO_MARKER, ".lakehouse.lock"]


def test_the_demo_shows_each_entity_and_the_unrouted_items_by_kind(tmp_path):
    hour = datetime(2026, 11, 1, 5, tzinfo=timezone.utc)
    tenant = "TENANT#tnt-00001"
    write_raw_batch(tmp_path, "app_users", 0, [
        {"pk": tenant, "sk": "USER#usr-0001", "email": "a@example.com", "_event_ts": hour, "sequence": 1},
        {"pk": tenant, "sk": "USER#usr-0001", "_event_name": "REMOVE", "_event_ts": hour, "sequence": 2},
    ], hour)
    # The same audit entry twice counts once: kinds count items, not changes.
    write_raw_batch(tmp_path, "app_unrouted", 0, [
        {"pk": tenant, "sk": sk, "_event_ts": hour, "sequence": number}
        for number, sk in enumerate(["AUDIT#000001", "AUDIT#000002", "AUDIT#000002", "APIKEY#key-000", "LEGACY"])
    ], hour)
    layout = DataLayout(tmp_path)

    lines = single_table_lines(layout, load_contracts(), status(layout))

    assert lines == [
        "app: a single-table design, 3 entities; items matching none are unrouted",
        "  entity      raw table     change log   current",
        "  tenants     app_tenants            0         0",
        "  users       app_users              2         1",
        "  invoices    app_invoices           0         0",
        "  (unrouted)  app_unrouted           5         4",
        "  unrouted items by kind: AUDIT# 2, (no #) 1, APIKEY# 1 (an entity declared in app's contract routes its kind)",
    ]


# The columns the summary reads of each mart, as the dbt project builds them.
SUMMARIZED_MARTS = {
    "dim_customers": "customer_id varchar",
    "fct_orders": "order_id varchar",
    "fct_order_lines": "order_id varchar",
    "dim_customers_history": "customer_key varchar, customer_id varchar, version_number int, version_event_name "
                             "varchar, valid_from timestamp, valid_to timestamp, is_current boolean, is_deleted boolean",
    "agg_daily_customer_activity": "activity_date date, registrations int, profile_updates int, deletes int, "
                                   "ttl_deletes int, net_customer_change int",
    "agg_daily_revenue_by_status": "status varchar, currency varchar, order_count int, total_amount decimal(18,2)",
    "mart_freshness": "curated_table varchar, newest_ingested_at timestamp, newest_event_at timestamp, "
                      "built_at timestamp",
}


def mart_rows(summary: str) -> dict[str, int]:
    """The summary's first block, mart -> rows, under its two header lines."""
    lines = summary.split("\n\n")[0].splitlines()[2:]
    return {name: int(rows) for name, rows in (line.split() for line in lines)}


def test_the_mart_summary_shows_the_invoiced_amounts_once_their_mart_is_built(tmp_path):
    database = DataLayout(tmp_path).dbt_database
    with duckdb.connect(str(database)) as con:
        con.execute(f"create schema {MARTS_SCHEMA}")
        for mart, columns in SUMMARIZED_MARTS.items():
            con.execute(f"create table {MARTS_SCHEMA}.{mart} ({columns})")
        con.execute(f"insert into {MARTS_SCHEMA}.dim_customers values ('cust-000001')")

    before = summarize_marts(tmp_path)

    assert mart_rows(before) == {**dict.fromkeys(MARTS, 0), "dim_customers": 1}
    assert INVOICED_MART not in before
    with duckdb.connect(str(database)) as con:
        con.execute(f"create table {MARTS_SCHEMA}.{INVOICED_MART} (tenant_id varchar, invoice_date date, "
                    "currency varchar, invoice_count bigint, invoiced_amount decimal(18,2))")
        con.execute(f"""insert into {MARTS_SCHEMA}.{INVOICED_MART} values
                        ('tnt-00000', '2026-11-01', 'EUR', 2, 150.50), ('tnt-00001', '2026-11-01', 'EUR', 1, 10.00),
                        ('tnt-00000', '2026-11-02', 'EUR', 1, 4.25), ('tnt-00001', '2026-11-02', 'JPY', 3, 900)""")

    after = summarize_marts(tmp_path)

    assert mart_rows(after)[INVOICED_MART] == 4
    section = after.split(f"{INVOICED_MART} (the app table's invoices, all days, per currency)\n")[1].split("\n\n")[0]
    assert [line.rstrip() for line in section.splitlines()] == [
        "currency  tenants  days  invoices  amount",
        "--------  -------  ----  --------  ------",
        "EUR       2        2     4         164.75",
        "JPY       1        1     3         900.00",
    ]


@pytest.mark.parametrize("interval", ["soon", "100", "10 parsecs", "1 month", "-5 seconds", ""])
def test_a_malformed_interval_is_an_argument_error_before_spark_starts(tmp_path, capsys, interval):
    with pytest.raises(SystemExit) as exit_info:
        main(["stream", "--data-dir", str(tmp_path), "--trigger", "processing-time", "--interval", interval])

    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert "argument --interval: not a trigger interval" in captured.err
    assert "starting Spark" not in captured.out and not any(tmp_path.iterdir())


def test_status_names_a_truncated_parquet_file(tmp_path, capsys):
    rows = [{"id": f"c{n}", "cust_name": f"Name {n}", "email": f"n{n}@example.com",
             "_event_ts": datetime(2026, 11, 1, n, tzinfo=timezone.utc), "sequence": n} for n in range(1, 4)]
    for batch_id in (1, 2):
        write_raw_batch(tmp_path, "customers", batch_id, rows, datetime(2026, 11, 1, batch_id, tzinfo=timezone.utc))
    assert main(["status", "--data-dir", str(tmp_path)]) == 0
    broken = sorted((tmp_path / "raw" / "customers_changes").rglob("*.parquet"))[-1]
    content = broken.read_bytes()
    broken.write_bytes(content[: len(content) // 2])  # a copy or a crash cut it short
    capsys.readouterr()

    assert main(["status", "--data-dir", str(tmp_path)]) == 2

    err = capsys.readouterr().err
    assert "1 Parquet file(s) cannot be read" in err and str(broken) in err
    assert "Traceback" not in err


def test_project_options_go_before_or_after_the_subcommand(tmp_path, capsys):
    before = ["--data-dir", str(tmp_path / "before"), "generate", "--customers", "2", "--records-per-file", "50"]
    after = ["generate", "--customers", "2", "--records-per-file", "50", "--data-dir", str(tmp_path / "after")]
    for argv in (before, after):
        assert main(argv) == 0, argv
    for data_dir in ("before", "after"):
        assert sorted((tmp_path / data_dir / "landing").rglob("*.jsonl")), data_dir
    for argv in (["--contracts-dir", str(tmp_path / "none"), "status", "--data-dir", str(tmp_path / "after")],
                 ["--data-dir", str(tmp_path / "after"), "status", "--contracts-dir", str(tmp_path / "none")]):
        assert main(argv) == 2, argv
        assert "invalid table contracts" in capsys.readouterr().err, argv


@pytest.mark.dbt
def test_project_options_work_before_after_and_among_dbt_arguments(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "lake"
    data.mkdir()

    # The natural order: dbt's command first, the project's option after it, dbt's own
    # after that: the two marts checked below and what they read, with the tests of those
    # alone (the whole project's build is not what this test is about).
    assert main(["dbt", "build", "--data-dir", str(data), "--select", "+dim_customers", "+fct_orders",
                 "--indirect-selection", "cautious"]) == 0
    with duckdb.connect(str(data / "lakehouse.duckdb"), read_only=True) as con:
        marts = {name for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [MARTS_SCHEMA]).fetchall()}
    assert {"dim_customers", "fct_orders"} <= marts
    capsys.readouterr()
    for argv in (["--data-dir", str(data), "dbt", "ls", "--select", "dim_customers"],
                 ["dbt", "ls", "--data-dir", str(data), "--select", "dim_customers"],
                 ["dbt", "--data-dir", str(data), "ls", "--select", "dim_customers"]):
        assert main(argv) == 0, argv
        assert "marts.samples.dim_customers" in capsys.readouterr().out, argv
    assert not (tmp_path / "data").exists(), "no empty ./data left behind"


@pytest.mark.dbt
def test_a_failing_dbt_command_shows_dbts_own_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lake").mkdir()

    assert main(["dbt", "build", "--data-dir", str(tmp_path / "lake"), "--full-refersh"]) == 2

    err = capsys.readouterr().err
    assert "No such option" in err and "--full-refersh" in err
    assert "dbt.log" not in err, "dbt wrote no log to point at"
    assert main(["dbt", "build", "--data-dir", str(tmp_path / "missing")]) == 2
    assert f"data directory {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists() and not (tmp_path / "data").exists()


@pytest.mark.dbt
@pytest.mark.parametrize(("dbt_args", "said"), [(["debug"], "All checks passed"),
                                                (["deps"], "No packages were found in packages.yml")])
def test_dbt_commands_without_a_target_path_run(tmp_path, monkeypatch, capsys, dbt_args, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lake").mkdir()

    assert main(["dbt", *dbt_args, "--data-dir", str(tmp_path / "lake")]) == 0

    captured = capsys.readouterr()
    assert said in captured.out + captured.err
    assert not (tmp_path / "target").exists() and not (tmp_path / "logs").exists(), "dbt wrote into the data dir"


@pytest.mark.spark
def test_the_interval_check_agrees_with_spark(spark):
    def spark_accepts(text: str) -> bool:
        trigger = spark._jvm.org.apache.spark.sql.streaming.Trigger
        try:
            trigger.ProcessingTime(text)
        except Exception:  # py4j carries Spark's IllegalArgumentException
            return False
        return True

    accepted = ["100 seconds", "1 minute 30 seconds", "interval 5 minutes", "2 Hours", "500 milliseconds", "1 day"]
    for text in accepted:
        assert checked_interval(text) == text and spark_accepts(text), text
    for text in ["soon", "10 parsecs", "1 month", "seconds", ""]:
        with pytest.raises(ValueError):
            checked_interval(text)
        assert not spark_accepts(text), text


@pytest.mark.spark
# SIGINT is a terminal's Ctrl-C; SIGTERM is what systemd, `timeout` and `kill -- -<pgid>`
# send. Both go to the whole process group, which holds the Python driver but not Spark's
# JVM and its Python workers (streaming/runtime/spark_session.py, `_start_driver_jvm`).
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_ctrl_c_stops_a_processing_time_stream_after_its_batch(tmp_path, signal_number):
    data = tmp_path / "data"
    # One contract, so that the new process's first batch builds one raw table's plans:
    # a cold JVM takes about 20 s less than for all six (the other records quarantine).
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    shutil.copy(SAMPLE_CONTRACTS_DIR / "customers.yml", contracts)
    assert main(["generate", "--data-dir", str(data), "--customers", "3", "--tenants", "0",
                 "--records-per-file", "40"]) == 0
    stream = LakehouseProcess(["stream", "--data-dir", str(data), "--contracts-dir", str(contracts), "--sink",
                               "parquet", "--trigger", "processing-time", "--interval", "1 hour",
                               "--max-bytes-per-trigger", "64m"], cwd=tmp_path)
    try:
        stream.wait_until(lambda: "\nrunning:" in "\n" + stream.out, "the stream's start")
        # Batch 0 starts as the query does: the signal lands while it runs or just after.
        stream.signal_group(signal_number)
        code = stream.wait(timeout=300)
    finally:
        stream.stop()
    out, err = stream.out, stream.err

    assert code == 0, err
    # The start line says how the byte budget became a file count.
    assert "files per micro-batch: about 64.0 MiB at" in out and "landing files now there" in out
    assert "stopping after the current batch" in out and "\nstopped\n" in out
    assert "Traceback" not in err and "Py4J" not in err
    assert "batch=0 " in err, "the batch in progress finished"
    assert (data / "checkpoints" / "landing_to_raw" / "commits" / "0").is_file(), "and was committed"
    assert not (data / "checkpoints" / "landing_to_raw" / "offsets" / "1").exists(), "no batch after it began"
