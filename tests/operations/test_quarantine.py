"""`lakehouse quarantine`: counts, PII-aware payloads, and exactly-once replay after a contract fix.

The scenario: generated CDC (with injected bad records) is streamed while the contracts
know only the orders table, so every customers record is quarantined as
`unknown_table`. Then the customers contract is added (an addition the evolution guard
allows) and the quarantined records are replayed through the same pipeline.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from app_items import audit, change_record, invoice, tenant, user
from failing_sinks import SinkThatDiesAfterWriting

from streaming.cli import main
from streaming.contracts.loader import load_contracts
from streaming.io.layout import DataLayout
from streaming.operations import quarantine as ops
from streaming.operations.batches import quarantine_replay as replay_ops
from streaming.operations.batches.quarantine_replay import quarantine_replay
from streaming.operations.batches.recorded_batch import QUARANTINE_REPLAYS
from streaming.operations.batches.reprocess import reprocess
from streaming.operations.stream import stream
from streaming.samples.generator import generate_cdc, land_cdc

PACKAGED_CONTRACTS = Path(__file__).resolve().parents[2] / "streaming" / "samples" / "contracts"
PII_KEY = "k" * 40


def _table_of(record: dict) -> str | None:
    if "tableName" in record:
        return record["tableName"]
    arn = record.get("eventSourceARN", "")
    return arn.split(":table/")[1].split("/")[0] if ":table/" in arn else None


def _json_records(lines: list[str]) -> list[tuple[str, dict]]:
    parsed = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            parsed.append((line, record))
    return parsed


def _raw_rows(layout_root: Path, table: str) -> list[tuple]:
    files = sorted((layout_root / "raw" / f"{table}_changes").glob("*/*/*.parquet"))
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute("select _event_id, _batch_id from read_parquet(?, hive_partitioning = false)",
                           [[str(path) for path in files]]).fetchall()


def _tree(folder: Path) -> dict[str, int]:
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def contract_dirs(tmp_path_factory) -> tuple[str, str]:
    """(orders only, orders and customers): the contracts before and after the fix."""
    before = tmp_path_factory.mktemp("contracts_before")
    shutil.copy(PACKAGED_CONTRACTS / "orders.yml", before)
    return str(before), str(PACKAGED_CONTRACTS)


@pytest.fixture(scope="module")
def cdc():
    return generate_cdc(seed=31, customers=12, orders_per_customer=2, malformed_rate=0.08)


def _stream(spark, cdc, contracts_dir: str, root: Path) -> DataLayout:
    """A data directory streamed with the orders-only contracts."""
    layout = DataLayout(root)
    land_cdc(layout.landing, cdc, records_per_file=40)
    stream(layout, sink="parquet", contracts_dir=contracts_dir, spark=spark, out=lambda _: None)
    return layout


@pytest.fixture(scope="module")
def streamed_once(spark, cdc, contract_dirs, tmp_path_factory) -> DataLayout:
    """The streamed data directory, for the tests that only read it."""
    return _stream(spark, cdc, contract_dirs[0], tmp_path_factory.mktemp("quarantine") / "data")


@pytest.fixture
def streamed(streamed_once, tmp_path) -> DataLayout:
    """A copy of the streamed data directory, for a test that replays into it. Its
    quarantine rows name their landing files in `streamed_once` (source_ref): a replay
    reads each record's payload from the quarantine, so that does not matter to it."""
    return DataLayout(shutil.copytree(streamed_once.root, tmp_path / "data"))


@pytest.fixture
def streamed_here(spark, cdc, contract_dirs, tmp_path) -> DataLayout:
    """A data directory streamed for the test alone: a reprocess tells a record that reached
    the new root from its landing file by the path its quarantine row names, which a copy
    would not have."""
    return _stream(spark, cdc, contract_dirs[0], tmp_path / "data")


def _landed_lines(layout: DataLayout) -> list[tuple[Path, str]]:
    return [(path, line) for path in sorted(layout.landing.rglob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def _customers_truth(cdc) -> tuple[list[tuple[str, dict]], dict[str, str]]:
    """Customers records that are JSON objects, and the expected reason of the bad ones
    once customers has a contract."""
    customers = [(line, record) for line, record in _json_records(cdc.records) if _table_of(record) == "customers"]
    bad = {line: reason for line, reason in cdc.malformed}
    return customers, {line: bad[line] for line, _ in customers if line in bad}


@pytest.mark.spark
def test_summary_counts_open_records_by_table_reason_and_day(streamed_once, cdc):
    streamed = streamed_once
    summary = ops.summarize(streamed.root)

    # An independent reader of the same files: DuckDB over the quarantine's Parquet.
    with duckdb.connect() as con:
        expected = con.execute(
            "select coalesce(_source_table, '-'), reason, cast(cast(_ingested_at as date) as varchar), count(*) "
            "from read_parquet(?, hive_partitioning = false) group by all",
            [str(streamed.quarantine / "_batch_id=*" / "*.parquet")],
        ).fetchall()
    assert summary.open_rows == {(table, reason, day): rows for table, reason, day, rows in expected}
    customers, _ = _customers_truth(cdc)
    unknown_customers = sum(rows for (table, reason, _), rows in summary.open_rows.items()
                            if (table, reason) == ("customers", "unknown_table"))
    assert unknown_customers == len(customers), "every customers record is held as unknown_table"
    assert summary.resolved_rows == 0 and summary.replays == 0


@pytest.mark.spark
def test_summary_command_prints_the_counts(streamed_once, capsys):
    streamed = streamed_once
    assert main(["quarantine", "summary", "--data-dir", str(streamed.root)]) == 0
    printed = capsys.readouterr().out.splitlines()
    total = sum(ops.summarize(streamed.root).open_rows.values())
    assert printed[0].split() == ["table", "reason", "day", "rows"]
    assert any(line.split()[:2] == ["customers", "unknown_table"] for line in printed)
    assert printed[-1] == f"open: {total} rows" and total > 0


@pytest.mark.spark
def test_replay_lands_each_record_once_and_failures_stay_quarantined_once(spark, streamed, cdc, contract_dirs):
    customers, still_bad = _customers_truth(cdc)
    quarantine_before = _tree(streamed.quarantine)

    first = quarantine_replay(streamed, reason="unknown_table", table="customers", sink="parquet",
                       contracts_dir=contract_dirs[1], spark=spark, out=lambda _: None)

    # A record is its text in its landing file: a re-delivery in another file is another
    # record (it lands once all the same: the batch drops repeated eventIDs).
    distinct_records = {(path, line) for path, line in _landed_lines(streamed) if line in dict(customers)}
    bad_records = {(path, line) for path, line in distinct_records if line in still_bad}
    assert first.records == len(distinct_records)
    assert first.landed == len(distinct_records) - len(bad_records)
    assert first.still_quarantined == dict(Counter(still_bad[line] for _, line in bad_records))
    landed = _raw_rows(streamed.root, "customers")
    true_events = cdc.true_events("customers")
    assert len(landed) == len(true_events), "every true customers event once, re-deliveries dropped"
    assert len({event_id for event_id, _ in landed}) == len(landed)
    assert {batch for _, batch in landed} == {first.batch_id} and first.batch_id < 0
    assert _tree(streamed.quarantine) == quarantine_before, "the quarantine itself is never rewritten"

    second = quarantine_replay(streamed, reason="unknown_table", table="customers", sink="parquet",
                        contracts_dir=contract_dirs[1], spark=spark, out=lambda _: None)

    assert second.records == len(bad_records), "only what still fails is selected again"
    assert second.landed == 0
    assert sorted(_raw_rows(streamed.root, "customers")) == sorted(landed), "nothing lands twice"
    assert _tree(streamed.quarantine) == quarantine_before
    summary = ops.summarize(streamed.root)
    assert sum(rows for (table, _, _), rows in summary.open_rows.items() if table == "customers") == \
        sum(1 for line, _ in customers if line in still_bad)
    assert summary.replays == 2

    # dbt sees the replayed customers once: the marts hold exactly the live items of the truth.
    from streaming.runtime.dbt_runner import run_dbt

    assert run_dbt(["build", "--select", "+dim_customers", "--indirect-selection", "cautious"], streamed.root).success
    with duckdb.connect(str(streamed.root / "lakehouse.duckdb"), read_only=True) as con:
        dim_rows = con.execute("select count(*) from lakehouse_marts.dim_customers").fetchall()[0][0]
    assert dim_rows == sum(item is not None for item in cdc.expected_state["customers"].values())


@pytest.mark.spark
def test_interrupted_replay_is_resumed_with_its_batch_and_lands_once(spark, streamed, cdc, contract_dirs):
    from streaming.io.formats.parquet.sink import LocalParquetSink

    contracts = load_contracts(contract_dirs[1])
    plan = replay_ops.plan_replay(streamed.root, table="customers")
    with pytest.raises(OSError):
        replay_ops.run_replay(spark, plan, contracts, SinkThatDiesAfterWriting(LocalParquetSink(str(streamed.root))))
    assert json.loads(plan.run_log.read_text())["status"] == "failed"
    assert _raw_rows(streamed.root, "customers"), "the interrupted attempt left rows in raw"
    assert _status_warnings(streamed, contract_dirs[1]) == [
        f"WARNING: quarantine replay {plan.replay_id} of {len(plan.records)} records is recorded as failed; raw may "
        "hold some of them although the quarantine still counts them as open. Run `lakehouse quarantine replay` "
        "again: it finishes that replay first"
    ]

    # A new, different selection must not start while the interrupted one is unfinished.
    resumed = replay_ops.plan_replay(streamed.root, reason="missing_key")
    assert resumed.resumed and resumed.batch_id == plan.batch_id
    assert {row.record_id for row in resumed.records} == {row.record_id for row in plan.records}
    result = replay_ops.run_replay(spark, resumed, contracts, LocalParquetSink(str(streamed.root)))

    landed = _raw_rows(streamed.root, "customers")
    assert len(landed) == len(cdc.true_events("customers")) == len({event for event, _ in landed})
    assert result.landed == len(plan.records) - sum(result.still_quarantined.values())
    assert _status_warnings(streamed, contract_dirs[1]) == [], "the resumed replay finished it"


def _status_warnings(layout: DataLayout, contracts_dir: str) -> list[str]:
    from streaming.operations.status import status

    return [line for line in status(layout, contracts_dir=contracts_dir).lines() if line.startswith("WARNING")]


def test_status_warns_of_a_quarantine_replay_that_did_not_finish(tmp_path, capsys):
    # The run log as replays wrote it before the one-off batches shared their run log.
    runs = tmp_path / "replays"
    runs.mkdir()
    identity = {"batch_id": -7, "selection": {"reason": None, "table": None, "batches": []}, "records": ["a", "b"]}
    (runs / "0001-aaaaaaaaaaaa.json").write_text(json.dumps({
        "replay_id": "0001-aaaaaaaaaaaa", **identity, "started_at": "2026-11-26T10:00:00+00:00", "status": "running",
        "landed": []}))
    (runs / "0002-bbbbbbbbbbbb.json").write_text(json.dumps({
        "replay_id": "0002-bbbbbbbbbbbb", **identity, "started_at": "2026-11-26T11:00:00+00:00", "status": "succeeded",
        "landed": ["a", "b"], "still_quarantined": {}}))

    assert main(["status", "--data-dir", str(tmp_path)]) == 0

    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING: quarantine replay 0001-aaaaaaaaaaaa of 2 records is recorded as running (still running, or stopped "
        "before it finished); raw may hold some of them although the quarantine still counts them as open. Run "
        "`lakehouse quarantine replay` again: it finishes that replay first"
    ]


@pytest.mark.spark
def test_reprocess_repeats_the_replay_without_landing_twice(spark, streamed_here, cdc, contract_dirs, tmp_path):
    streamed = streamed_here
    quarantine_replay(streamed, reason="unknown_table", table="customers", sink="parquet",
               contracts_dir=contract_dirs[1], spark=spark, out=lambda _: None)
    live_events = Counter(event for event, _ in _raw_rows(streamed.root, "customers"))
    # Retention removed one landing file holding customers records since the replay:
    # the reprocess's stream cannot read them, the replay's stored copy still can.
    files = sorted(streamed.landing.rglob("*.jsonl"))
    gone = next(path for path in files
                if any(_table_of(record) == "customers"
                       for _, record in _json_records(path.read_text(encoding="utf-8").splitlines())))
    _, still_bad = _customers_truth(cdc)

    def customer_events(paths: list[Path]) -> set[str]:
        return {record["eventID"] for path in paths
                for line, record in _json_records(path.read_text(encoding="utf-8").splitlines())
                if _table_of(record) == "customers" and line not in still_bad}

    gone_events = customer_events([gone])
    kept_events = customer_events([path for path in files if path != gone])
    gone.unlink()

    target = tmp_path / "v2"
    reprocess(streamed, target, sink="parquet", contracts_dir=contract_dirs[1], spark=spark, out=lambda _: None)

    rebuilt = _raw_rows(target, "customers")
    replayed_here = Counter(event for event, batch in rebuilt if batch < 0)
    assert replayed_here == Counter(gone_events), "the gone file's records, from the replay's stored copy, once"
    assert not [event for event, batch in rebuilt if batch >= 0 and event not in kept_events]
    # Each record lands once. An event re-delivered in the gone file and in a kept one is
    # two records in two batches, as the stream lands re-deliveries: dbt keeps one.
    assert Counter(event for event, _ in rebuilt) == Counter(
        {event: 1 + (event in gone_events and event in kept_events) for event in live_events})
    (run,) = QUARANTINE_REPLAYS.runs(target)
    assert run["status"] == "succeeded" and run["batch_id"] == QUARANTINE_REPLAYS.runs(streamed.root)[0]["batch_id"]


@pytest.mark.spark
def test_show_prints_no_clear_pii_from_the_sample_data(streamed_once, cdc, contract_dirs, monkeypatch, capsys):
    streamed = streamed_once
    monkeypatch.setenv("LAKEHOUSE_PII_KEY", PII_KEY)
    customers, _ = _customers_truth(cdc)
    clear_values = {
        value["S"]
        for _, record in customers
        for part in ("Keys", "NewImage", "OldImage")
        for name, value in record.get("dynamodb", {}).get(part, {}).items()
        if name in ("custName", "email") and isinstance(value, dict) and "S" in value
    }
    assert clear_values

    for reason in ("unknown_table", "invalid_json"):
        assert main(["quarantine", "show", "--data-dir", str(streamed.root), "--contracts-dir", contract_dirs[1],
                     "--reason", reason, "--limit", "1000"]) == 0
        printed = capsys.readouterr().out
        assert "--- record" in printed
        assert not [value for value in clear_values if value in printed]

    assert main(["quarantine", "show", "--data-dir", str(streamed.root), "--contracts-dir", contract_dirs[1],
                 "--reason", "unknown_table", "--table", "customers", "--limit", "1"]) == 0
    printed = capsys.readouterr().out
    payload = json.loads(printed.splitlines()[3].strip())
    (record,) = {json.dumps(record): record for _, record in customers
                 if record["eventID"] == payload["eventID"]}.values()
    name = record["dynamodb"]["Keys"]["custName"]["S"]
    expected = "pii:" + hmac.new(PII_KEY.encode(), f"cust_name:{name}".encode(), hashlib.sha256).hexdigest()
    assert payload["dynamodb"]["Keys"]["custName"] == {"S": expected}, "the marts' keyed pseudonym scheme"
    assert payload["dynamodb"]["Keys"]["id"] == record["dynamodb"]["Keys"]["id"], "non-PII values stay readable"


def test_masker_hides_pii_values_in_payloads_that_do_not_parse():
    masker = ops.PiiMasker({"custName": "cust_name", "email": "email", "giftMessage": "gift_message"})
    cut, note = masker.mask_payload('{"eventName":"INSERT","dynamodb":{"NewImage":{"id":{"S":"c1"},'
                                    '"custName":{"S":"Ann Smith"},"email":{"S":"ann@exa')
    assert "Ann Smith" not in cut and "ann@exa" not in cut and '"id":{"S":"c1"}' in cut
    assert note.startswith("not JSON: 2 PII value(s)")

    nested, note = masker.mask_payload('{"giftMessage":{"M":{"text":{"S":"for Ann"}}},"x":1 garbage')
    assert "for Ann" not in nested and "rest hidden" in nested

    escaped, _ = masker.mask_payload('{"custName":{"S":"Ann \\"The\\" Smith"}, trailing')
    assert "Smith" not in escaped

    plain, note = masker.mask_payload("eventName=INSERT;table=orders")
    assert plain == "eventName=INSERT;table=orders" and "may hold PII" in note


def test_masker_masks_without_a_key_and_keeps_nulls():
    masker = ops.PiiMasker({"email": "email"})
    masked, note = masker.mask_payload('{"NewImage":{"email":{"S":"a@b.c"},"other":{"email":{"NULL":true}}}}')
    assert note is None
    assert json.loads(masked) == {"NewImage": {"email": {"S": "***"}, "other": {"email": {"NULL": True}}}}


def test_show_needs_a_reason_and_replay_of_an_empty_quarantine_does_nothing(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["quarantine", "show", "--data-dir", str(tmp_path)])
    assert exit_info.value.code == 2 and "--reason" in capsys.readouterr().err
    assert main(["quarantine", "replay", "--data-dir", str(tmp_path)]) == 0
    assert "nothing to replay" in capsys.readouterr().out
    assert not QUARANTINE_REPLAYS.directory(tmp_path).exists()


def write_quarantine_rows(root: Path, rows: dict[str, str] | list[tuple[str, str, str | None]]) -> None:
    """One quarantine batch of rows (reason -> payload, or (reason, payload, table) triples),
    as QuarantineWriter lays them out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    triples = [(reason, payload, None) for reason, payload in rows.items()] if isinstance(rows, dict) else rows
    folder = DataLayout(root).quarantine / "_batch_id=0"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({
        "_source_table": [table for _, _, table in triples], "reason": [reason for reason, _, _ in triples],
        "payload": [payload for _, payload, _ in triples],
        "source_ref": [f"file:/landing/{n}.gz#0" for n in range(len(triples))],
        "_ingested_at": pa.array([None] * len(triples), pa.timestamp("us", tz="UTC")),
    }), folder / "part-0.parquet")


def test_replay_leaves_out_rows_that_do_not_hold_their_record_and_says_what_to_do(tmp_path, capsys):
    # Such rows hold a read error, a compression's name or a prefix, not the record: a replay
    # could only quarantine them again (as invalid_json), on every run. Or they hold a
    # record the decoder's JSON reader would accept although the splitter refused it.
    rows = {
        "unreadable_file": "EOFError: the GZIP stream ends before its end-of-stream marker",
        "unsupported_compression": "Firehose CompressionFormat ZIP: not read",
        "record_too_large": '{"eventID":"e1","dynamodb":{"NewImage":{"blob":{"S":"xxxx',
        "invalid_utf8": '{"eventID":"e2","eventName":"INSERT\ufffd"}',
        # Spark's from_json keeps the last "eventName" and ignores the text after the
        # object: replayed, these two would land.
        "duplicate_key": '{"eventID":"e3","eventName":"INSERT","eventName":"REMOVE"}',
        "trailing_garbage": '{"eventID":"e4","eventName":"INSERT"} and more',
    }
    write_quarantine_rows(tmp_path, rows)

    plan = replay_ops.plan_replay(tmp_path)
    assert plan.records == () and sorted(row.reason for row in plan.not_replayable) == sorted(rows)
    assert main(["quarantine", "replay", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for reason, advice in replay_ops.NOT_REPLAYABLE_REASONS.items():
        assert f"left out 1 record(s) with reason {reason}: {advice}" in out
    assert "nothing to replay" in out and not QUARANTINE_REPLAYS.directory(tmp_path).exists()


def test_summary_and_show_say_what_to_do_about_records_that_name_no_table(tmp_path, capsys):
    record = {"eventID": "e1", "eventName": "INSERT", "dynamodb": {"Keys": {"id": {"S": "c-1"}}}}
    write_quarantine_rows(tmp_path, {"no_table_name": json.dumps(record)})
    advice = "no_table_name: the record names no table"

    assert main(["quarantine", "summary", "--data-dir", str(tmp_path)]) == 0
    assert advice in capsys.readouterr().out
    assert main(["quarantine", "show", "--reason", "no_table_name", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert advice in out and "eventSourceARN of the stream they were read from" in out


@pytest.mark.spark
def test_replay_routes_a_single_table_design_s_records_to_their_entities(spark, tmp_path, caplog):
    """Records of `app` quarantined before its contract existed are routed by the replay as
    the stream routes them: each entity's raw table, and app_unrouted for the AUDIT# item."""
    layout = DataLayout(tmp_path / "data")
    # The packaged contract of `app` alone: the others' raw tables would only add to the plan.
    app_only = tmp_path / "contracts"
    app_only.mkdir()
    shutil.copy(PACKAGED_CONTRACTS / "app.yml", app_only)
    items = {"app_tenants": tenant("t1"), "app_users": user("t1", "u1"), "app_invoices": invoice("t1", "i1"),
             "app_unrouted": audit("t1", "a1")}
    records = [change_record(f"e-{table}", "INSERT", 1_790_000_000 + n, new=item)
               for n, (table, item) in enumerate(items.items())]
    write_quarantine_rows(layout.root, [("unknown_table", record, "app") for record in records])

    printed: list[str] = []
    with caplog.at_level(logging.INFO, logger="streaming"):
        result = quarantine_replay(layout, table="app", sink="parquet", contracts_dir=str(app_only),
                                   spark=spark, out=printed.append)

    assert (result.records, result.landed, result.still_quarantined) == (4, 4, {})
    # Issue 30, item 17: it was printed and logged, and the CLI shows both.
    assert [*printed, *caplog.messages].count(result.summary()) == 1
    assert {table: [event for event, _ in _raw_rows(layout.root, table)] for table in items} == {
        table: [f"e-{table}"] for table in items}
    assert ops.open_records(layout.root) == []
    printed.clear()
    assert quarantine_replay(layout, table="app", sink="parquet", contracts_dir=str(app_only), spark=spark,
                             out=printed.append) is None, "nothing is left to replay"
    assert printed == ["nothing to replay"], "no replay id or run log it would not write"


def test_show_prints_a_record_nested_too_deep_for_json_with_its_pii_hidden(tmp_path, monkeypatch, capsys):
    # The landing reader quarantines a record nested past Python's recursion limit as
    # invalid_json; show read it with json.loads and died with a RecursionError.
    # No PII key (another test's may be in the environment): hidden values read ***.
    monkeypatch.delenv("LAKEHOUSE_PII_KEY", raising=False)
    deep = '{"eventName":"INSERT","dynamodb":{"NewImage":{"email":{"S":"ann@example.com"},"x":' \
        + '{"L":[' * 3000 + ']}' * 3000 + '}}}'
    write_quarantine_rows(tmp_path, {"invalid_json": deep})

    assert main(["quarantine", "show", "--reason", "invalid_json", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ann@example.com" not in out and '"email":{"S":"***"}' in out
    assert "note: nested too deep for Python's JSON reader, searched as text: 1 PII value(s)" in out
