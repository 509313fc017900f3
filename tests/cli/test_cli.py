"""The `lakehouse` console script: commands, friendly errors, the demo flow."""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest
from packaged_contracts import packaged_contracts_dir

from streaming.cli import main
from streaming.cli.options import byte_size
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.io.layout import DataLayout, default_data_dir
from streaming.operations.demo import DEMO_MARKER, record_demo_output, run_demo
from streaming.operations.marts_summary import INVOICED_MART, MARTS_SCHEMA
from streaming.operations.status import status
from streaming.runtime.dbt_runner import run_dbt_command
from streaming.samples.generator import CUSTOMERS, generate_cdc, write_landing_files


def test_generate_lands_jsonl_under_the_data_dir(tmp_path, capsys):
    code = main(["generate", "--data-dir", str(tmp_path), "--customers", "4", "--records-per-file", "20",
                 "--format", "kinesis", "--seed", "3"])

    assert code == 0
    files = sorted((tmp_path / "landing").rglob("*.jsonl"))
    assert len(files) >= 2
    assert all(path.relative_to(tmp_path / "landing").parts[0].isdigit() for path in files)  # yyyy/mm/dd/hh
    lines = [line for path in files for line in path.read_text().splitlines() if line.strip()]
    assert f"wrote {len(lines)} records in {len(files)} files" in capsys.readouterr().out


@pytest.mark.parametrize(("tenants", "app_records"), [("0", False), ("2", True)])
def test_generate_lands_the_app_tables_items_for_its_tenants(tmp_path, tenants, app_records):
    assert main(["generate", "--data-dir", str(tmp_path), "--customers", "2", "--tenants", tenants]) == 0

    lines = [line for path in (tmp_path / "landing").rglob("*.jsonl") for line in path.read_text().splitlines()]
    assert any('"TENANT#' in line for line in lines) == app_records


def test_data_dir_defaults_to_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKEHOUSE_DATA_DIR", str(tmp_path / "elsewhere"))
    assert default_data_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("LAKEHOUSE_DATA_DIR")
    assert default_data_dir() == Path("data")


def test_stream_without_landing_files_is_a_friendly_error(tmp_path, capsys):
    code = main(["stream", "--data-dir", str(tmp_path)])

    captured = capsys.readouterr()
    assert code == 2
    assert "no landing files" in captured.err and "lakehouse generate" in captured.err
    assert "Traceback" not in captured.err


def test_invalid_arguments_exit_2_without_traceback(tmp_path, capsys):
    for option, value in [("--max-files-per-trigger", "0"), *(("--max-bytes-per-trigger", size)
                                                              for size in ("0", "-5m", "5 t", "lots"))]:
        with pytest.raises(SystemExit) as exit_info:
            main(["stream", "--data-dir", str(tmp_path), option, value])
        assert exit_info.value.code == 2
    assert main(["generate", "--data-dir", str(tmp_path), "--customers", "2", "--records-per-file", "0"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["stream", "--sink", "delta"])
    assert exit_info.value.code == 2


def test_bad_contracts_dir_is_a_friendly_error(tmp_path, capsys):
    assert main(["status", "--data-dir", str(tmp_path), "--contracts-dir", str(tmp_path / "nope")]) == 2
    assert "invalid table contracts" in capsys.readouterr().err


def test_status_of_an_empty_data_dir(tmp_path, capsys):
    assert main(["status", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "customers" in out and "orders" in out and "quarantine: 0 rows" in out


def test_status_warns_of_a_backfill_that_did_not_finish(tmp_path, capsys):
    runs = tmp_path / "backfills"
    runs.mkdir()
    identity = {"export_dir": "/exports/AWSDynamoDB/01-a", "table": "orders", "raw_table": "orders", "batch_id": -5}
    (runs / "01-a.json").write_text(json.dumps({**identity, "export_id": "01-a", "status": "running"}))
    (runs / "01-b.json").write_text(json.dumps({**identity, "export_id": "01-b", "status": "failed"}))
    (runs / "01-c.json").write_text(json.dumps({**identity, "export_id": "01-c", "status": "succeeded"}))

    assert main(["status", "--data-dir", str(tmp_path)]) == 0

    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING: backfill of export 01-a into orders is recorded as running (still running, or stopped before "
        "it finished); raw may hold none or part of it. Run it again: lakehouse backfill --export "
        "/exports/AWSDynamoDB/01-a --table orders",
        "WARNING: backfill of export 01-b into orders is recorded as failed; raw may hold none or part of it. "
        "Run it again: lakehouse backfill --export /exports/AWSDynamoDB/01-a --table orders",
    ]


@pytest.mark.spark
def test_demo_generates_streams_counts_builds_the_marts_and_a_second_demo_starts_clean(spark, tmp_path):
    layout = DataLayout(tmp_path / "data")
    stale = layout.raw / "customers_changes" / "_ingest_hour=2026-01-01-00" / "_batch_id=99"
    stale.mkdir(parents=True)
    (stale / "part-0.parquet").write_bytes(b"left over from an earlier run")
    record_demo_output(layout.root)  # an earlier demo wrote it
    printed: list[str] = []

    result = run_demo(layout, seed=9, customers=8, tenants=3, record_format="streams", sink="parquet", spark=spark,
                      out=printed.append)

    assert not stale.exists(), "the demo starts from a fresh data directory"
    assert result.status.quarantine_by_reason == result.generation.malformed_by_reason
    raw_tables = ["customers", "orders", "app_tenants", "app_users", "app_invoices", "app_unrouted"]
    assert result.status.raw_batches == dict.fromkeys(raw_tables, 1)
    # The change log holds every true event once (re-deliveries dropped); the current
    # state one row per key ever seen, tombstones included: per raw table, so per entity
    # of the single-table design too.
    truth = generate_cdc(seed=9, customers=8, tenants=3, record_format="streams")
    assert sorted(truth.event_counts) == sorted(raw_tables)
    assert result.status.change_rows == {table: sum(names.values()) for table, names in truth.event_counts.items()}
    assert result.status.current_rows == {table: len(keys) for table, keys in truth.expected_state.items()}
    # The summary shows the app's entities and its unrouted items, by kind.
    unrouted_kinds = Counter(sk.split("#")[0] + "#" for _, sk in truth.expected_state["app_unrouted"])
    assert list(result.single_table) == [
        "app: a single-table design, 3 entities; items matching none are unrouted",
        "  entity      raw table     change log   current",
        *(f"  {entity:<10}  {table:<12}  {sum(truth.event_counts[table].values()):>10}  "
          f"{len(truth.expected_state[table]):>8}"
          for entity, table in (("tenants", "app_tenants"), ("users", "app_users"), ("invoices", "app_invoices"),
                                ("(unrouted)", "app_unrouted"))),
        "  unrouted items by kind: " + ", ".join(f"{kind} {items}" for kind, items in sorted(
            unrouted_kinds.items(), key=lambda kind_items: (-kind_items[1], kind_items[0])))
        + " (an entity declared in app's contract routes its kind)",
    ]
    assert all(line in printed for line in result.single_table)
    # What landed per entity is the truth's final item: the latest change per key, by the
    # ordering value the sink stores, read straight from the change logs.
    with duckdb.connect() as con:
        def latest(table: str, columns: str) -> dict[tuple[str, str], tuple]:
            rows = con.execute(
                f"select pk, sk, _is_deleted, {columns} from read_parquet(?) "
                "qualify row_number() over (partition by pk, sk order by _ordering_value desc) = 1",
                [str(layout.raw / f"{table}_changes" / "*" / "*" / "*.parquet")]).fetchall()
            return {(pk, sk): tuple(values) for pk, sk, *values in rows}

        invoices = latest("app_invoices", "amount, status")
        unrouted = latest("app_unrouted", "_change_record")
    assert invoices == {key: (True, None, None) if item is None else (False, item["amount"]["N"], item["status"]["S"])
                        for key, item in truth.expected_state["app_invoices"].items()}
    for (pk, sk), (deleted, change_record) in unrouted.items():
        record = json.loads(change_record)["dynamodb"]
        assert (record["Keys"]["pk"]["S"], record["Keys"]["sk"]["S"]) == (pk, sk)
        assert record.get("NewImage") == truth.expected_state["app_unrouted"][pk, sk]
        assert deleted == (truth.expected_state["app_unrouted"][pk, sk] is None)
    with duckdb.connect() as con:
        inserts = con.execute(
            "select count(*) from read_parquet(?) where _event_name = 'INSERT'",
            [str(layout.raw / "customers_changes" / "*" / "*" / "*.parquet")],
        ).fetchall()[0][0]
    assert inserts == truth.event_counts["customers"]["INSERT"] == result.generation.events["customers"]["INSERT"]
    # The demo's status comes before its dbt build; the misfit counts come from that build.
    after_build = status(layout, contracts_dir=str(SAMPLE_CONTRACTS_DIR))
    assert result.status.cast_misfits_not_counted.startswith("no dbt build") and after_build.cast_misfits
    assert replace(result.status, cast_misfits=after_build.cast_misfits, cast_misfits_not_counted=None) == after_build
    assert any("change log" in line and "current" in line for line in printed)
    assert printed[0].startswith("[1/4]") and any(line.startswith("[4/4]") for line in printed)
    assert any(line.startswith("customers") for line in printed)
    # dbt ran on what the stream wrote: the marts hold the live items of the truth.
    live = {table: sum(item is not None for item in truth.expected_state[table].values())
            for table in ("customers", "orders")}
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        marts = {
            table: con.execute(f"select count(*) from {MARTS_SCHEMA}.{mart}").fetchall()[0][0]
            for table, mart in (("customers", "dim_customers"), ("orders", "fct_orders"))
        }
    assert marts == live
    # The activity mart counts each true event once: registrations are the distinct INSERTs.
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        registrations, updates = con.execute(
            f"select sum(registrations), sum(profile_updates) from {MARTS_SCHEMA}.agg_daily_customer_activity"
        ).fetchall()[0]
        current_versions = con.execute(
            f"select count(*) from {MARTS_SCHEMA}.dim_customers_history where is_current").fetchall()[0][0]
    assert registrations == truth.event_counts["customers"]["INSERT"]
    assert updates == truth.event_counts["customers"]["MODIFY"]
    assert current_versions == live["customers"]
    assert result.marts_summary is not None
    assert "agg_daily_customer_activity\nday" in result.marts_summary
    assert "dim_customers_history (the 2 customers with the most versions)" in result.marts_summary
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        invoiced_built = con.execute("select count(*) from information_schema.tables where table_schema = ? "
                                     "and table_name = ?", [MARTS_SCHEMA, INVOICED_MART]).fetchall()[0][0] == 1
    assert (f"{INVOICED_MART} (the app table's invoices, all days, per currency)" in result.marts_summary) \
        == invoiced_built
    # How current each mart is, and where their documentation is served.
    freshness = result.marts_summary.split("mart_freshness (the first query when numbers look stale)\n")[1]
    assert all(mart in freshness for mart in ("dim_customers", "fct_orders", "agg_daily_revenue_by_status"))
    assert any("`lakehouse docs`" in line and "http://127.0.0.1:8080/" in line for line in printed)

    # A second demo with another seed starts clean: its marts hold its own customers only,
    # nothing of the first demo's incremental tables.
    assert (layout.root / DEMO_MARKER).is_file()
    # Without the app's tenants (the first demo had them): adding tenants leaves the customers'
    # histories as they were, and the stream then plans two raw tables' writes instead of six;
    # given the two tables' contracts alone, it also plans two raw tables' decodes, not six.
    # Its dbt step is the first demo's, checked above: here dbt builds the mart compared
    # below and what it reads, with their data tests (the unit tests mock every input).
    run_demo(layout, seed=2, customers=3, tenants=0, record_format="streams", sink="parquet", spark=spark,
             contracts_dir=packaged_contracts_dir(tmp_path / "contracts", "customers", "orders"), build_marts=False,
             out=lambda _: None)
    run_dbt_command(layout.root, ["build", "--select", "+dim_customers", "--exclude-resource-type", "unit_test"],
                    report=lambda _: None)
    second = generate_cdc(seed=2, customers=3, record_format="streams")
    live_ids = Counter(key[0] for key, item in second.expected_state[CUSTOMERS].items() if item is not None)
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        dim_ids = Counter(customer_id for (customer_id,) in con.execute(
            f"select customer_id from {MARTS_SCHEMA}.dim_customers").fetchall())
    assert dim_ids == live_ids


def test_new_commands_reject_incomplete_arguments(tmp_path, capsys):
    for argv in (["backfill"], ["reprocess"], ["switch"], ["switch", "--to", "x", "--rollback"],
                 ["reconcile", "--source", "x"]):
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, "--data-dir", str(tmp_path)])
        assert exit_info.value.code == 2, argv
    assert main(["backfill", "--data-dir", str(tmp_path), "--export", str(tmp_path / "missing")]) == 2
    assert "export directory not found" in capsys.readouterr().err


def test_a_fresh_demo_start_forgets_switches_and_backfill_records(tmp_path):
    from streaming.io.layout import POINTER_FILE, read_pointer
    from streaming.operations.demo import prepare_demo_dir

    (tmp_path / POINTER_FILE).write_text('{"data_root": "/elsewhere", "previous": null}')
    (tmp_path / "backfills").mkdir()
    (tmp_path / "backfills" / "01793498400000-0dbdece3.json").write_text('{"status": "succeeded"}')
    (tmp_path / "replays").mkdir()
    (tmp_path / "replays" / "0001-0123456789ab.json").write_text('{"status": "succeeded", "landed": ["x"]}')
    record_demo_output(tmp_path)  # the marker of the demo run that made these
    assert read_pointer(tmp_path).data_root == Path("/elsewhere")

    assert prepare_demo_dir(tmp_path) == "cleared"

    assert read_pointer(tmp_path).data_root == tmp_path
    assert not (tmp_path / "backfills").exists()
    assert not (tmp_path / "replays").exists(), "a replay record of old data would close new records"


@pytest.mark.parametrize(("text", "size"), [
    ("536870912", 536_870_912), ("512m", 512 * 1024**2), ("512MiB", 512 * 1024**2), ("1g", 1024**3),
    ("1GB", 1024**3), ("64k", 65_536), (" 2 g ", 2 * 1024**3),
])
def test_byte_sizes_are_read_as_spark_writes_them(text, size):
    assert byte_size(text) == size


# `{missing}` does not exist, `{file}` is a file where a folder belongs, `{unreadable}` a
# folder its owner may not read: every command refuses each with exit 2 and one line.
BAD_PATHS = [
    (["status", "--data-dir", "{missing}"], "data directory {missing} does not exist"),
    (["status", "--data-dir", "{file}"], "data directory {file} is not a folder"),
    (["status", "--data-dir", "{unreadable}"], "data directory {unreadable} cannot be read"),
    (["status", "--data-dir", "{empty}", "--contracts-dir", "{missing}"], "invalid table contracts"),
    (["status", "--data-dir", "{empty}", "--contracts-dir", "{file}"], "invalid table contracts"),
    (["quarantine", "summary", "--data-dir", "{missing}"], "data directory {missing} does not exist"),
    (["quarantine", "show", "--reason", "invalid_json", "--data-dir", "{file}"], "is not a folder"),
    (["quarantine", "replay", "--data-dir", "{unreadable}"], "cannot be read"),
    (["dbt", "build", "--data-dir", "{missing}"], "data directory {missing} does not exist"),
    (["dbt", "build", "--data-dir", "{file}"], "data directory {file} is not a folder"),
    (["docs", "--data-dir", "{missing}"], "data directory {missing} does not exist"),
    (["stream", "--data-dir", "{missing}"], "no landing files under {missing}/landing"),
    (["stream", "--data-dir", "{file}"], "no landing files under {file}/landing"),
    (["generate", "--data-dir", "{file}"], "{file}/landing"),
    (["generate", "--data-dir", "{unreadable}"], "Permission denied"),
    (["demo", "--skip-dbt", "--data-dir", "{file}"], "cannot open the lock file {file}/.lakehouse.lock"),
    (["backfill", "--data-dir", "{empty}", "--export", "{missing}"], "export directory not found"),
    (["backfill", "--data-dir", "{empty}", "--export", "{file}"], "export directory not found"),
    (["reprocess", "--data-dir", "{empty}", "--to", "{file}"], "no landing files"),
    (["reprocess", "--data-dir", "{landed}", "--to", "{file}"], "--to {file} is not a folder"),
    (["reprocess", "--data-dir", "{landed}", "--to", "{unreadable}"], "--to {unreadable} cannot be read or written"),
    (["reprocess", "--data-dir", "{landed}", "--to", "{tmp}/new", "--from-landing", "{missing}"],
     "no landing files under {missing}"),
    (["switch", "--data-dir", "{empty}", "--to", "{missing}"], "was not made by `lakehouse reprocess`"),
    (["switch", "--data-dir", "{empty}", "--to", "{file}"], "was not made by `lakehouse reprocess`"),
    (["reconcile", "--source", "{missing}", "--target", "{empty}"], "is neither an export directory"),
    (["reconcile", "--source", "{empty}", "--target", "{file}"], "is neither an export directory"),
    (["reconcile", "--source", "{empty}", "--target", "{empty}", "--json", "{missing}/report.json"],
     "folder {missing} does not exist"),
    (["reconcile", "--source", "{empty}", "--target", "{empty}", "--json", "{file}/report.json"],
     "folder {file} does not exist"),
]


@pytest.mark.parametrize(("argv", "said"), BAD_PATHS, ids=[" ".join(argv) for argv, _ in BAD_PATHS])
def test_a_bad_path_is_refused_in_one_line(tmp_path, capsys, argv, said):
    if any("{unreadable}" in arg for arg in argv) and os.geteuid() == 0:
        pytest.skip("root reads every folder: the unreadable case needs an unprivileged user")
    paths = {"tmp": tmp_path, "missing": tmp_path / "missing", "file": tmp_path / "a-file",
             "unreadable": tmp_path / "locked", "empty": tmp_path / "empty", "landed": tmp_path / "landed"}
    paths["file"].write_text("a file where a folder belongs")
    paths["empty"].mkdir()
    paths["unreadable"].mkdir(mode=0)
    write_landing_files(paths["landed"] / "landing", seed=3, customers=2, records_per_file=50)
    try:
        code = main([arg.format(**paths) for arg in argv])
    finally:
        paths["unreadable"].chmod(0o700)

    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"lakehouse {argv[0]}") and err.count("\n") == 1, err
    assert said.format(**paths) in err


@pytest.mark.parametrize("argv", [
    ["docs", "--port", "99999"], ["docs", "--port", "-1"], ["quarantine", "show", "--reason", "x", "--limit", "-1"],
    ["generate", "--customers", "-3"], ["generate", "--orders-per-customer", "-1"], ["generate", "--seed", "x"],
    ["generate", "--tenants", "-1"], ["demo", "--tenants", "x"],
    ["dbt", "build", "--reprocess-from", "yesterday", "--reprocess-to", "2026-11-02"],
    ["dbt", "build", "--reprocess-from", "2026-11-03", "--reprocess-to", "2026-11-02"],
    ["dbt", "build", "--reprocess-from", "2026-11-03"],
])
def test_a_bad_argument_is_refused_without_a_traceback(tmp_path, capsys, argv):
    try:
        code = main([*argv, "--data-dir", str(tmp_path)])
    except SystemExit as exit_info:  # argparse's own usage error
        code = exit_info.code

    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.strip(), "the refusal says why"


@pytest.mark.parametrize("argv", [
    ["status", "--data-dir", "s3://bucket/lake"],
    ["reprocess", "--to", "s3://bucket/rebuilt"],
])
def test_a_url_is_refused_as_a_data_directory(tmp_path, monkeypatch, capsys, argv):
    # Taken as a path, s3://bucket/lake would quietly become a local folder named "s3:".
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)

    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "is a URL; a data directory is a local folder" in err, err
    assert not (tmp_path / "s3:").exists()


def test_a_url_in_the_data_dir_variable_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAKEHOUSE_DATA_DIR", "s3://bucket/lake")

    code = main(["status"])

    assert code == 2 and "is a URL" in capsys.readouterr().err
    assert not (tmp_path / "s3:").exists()
