"""Start-up (streaming/runtime/startup.py): one function starts every runner's stream, and
runs its steps in the order its docstring lists whatever the runner's ends are."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from contract_files import checked_and_registered, write_contract
from streaming.contracts.evolution import ContractRegistry, contract_version
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io.layout import TEMPORARY_FOLDER, DataLayout
from streaming.operations import stream as stream_operation
from streaming.runtime import startup
from streaming.runtime.spark_session import SparkStartError


class RecordedEnds:
    """Ends that record what start_stream asks of them."""

    raw_root = "s3://lake/raw"
    checkpoint_dir = "s3://lake/checkpoints/job"
    trigger = "processing-time"
    interval = "2 minutes"
    query_name = "job"
    catalog = None

    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def stream_id(self, contracts):
        self.steps.append("stream id")
        return "stream-7"

    def sinks(self, spark, contracts, stream_id):
        self.steps.append(f"sinks for {stream_id}")
        return "raw sink", "quarantine"

    def source(self, spark, report):
        self.steps.append("source")
        return "kinesis envelope"


@pytest.fixture
def steps(monkeypatch) -> list[str]:
    """What start_stream did, in order; the steps that need Spark only say so."""
    done: list[str] = []
    monkeypatch.setattr(startup, "check_contract_changes",
                        lambda raw_root, contracts, report: done.append(f"contracts against {raw_root}"))
    monkeypatch.setattr(startup, "check_partition_expression",
                        lambda spark, contract: done.append(f"partition of {contract.raw_table}"))
    monkeypatch.setattr(startup, "plan_raw_tables",
                        lambda spark, contracts: done.append(f"plans of {', '.join(contracts)}"))
    monkeypatch.setattr(startup, "register_contract_versions",
                        lambda raw_root, contracts: done.append(f"versions registered under {raw_root}"))
    monkeypatch.setattr(startup.Pipeline, "warm_up", lambda pipeline, spark: done.append(f"decode warmed up in {spark}"))

    def run_stream(spark, pipeline, source, **where):
        done.append(f"query over {source}: {where}")
        return "query"

    monkeypatch.setattr(startup, "run_stream", run_stream)
    return done


def test_start_stream_claims_checks_builds_runs_the_runners_own_step_then_starts_the_query(steps):
    contracts = {name: load_contracts()[name] for name in ("customers", "orders")}

    started = startup.start_stream("spark", RecordedEnds(steps), contracts, print,
                                   before_stream=lambda pipeline: steps.append(f"before stream into {pipeline.sink}"))

    assert steps == [
        "stream id",
        "contracts against s3://lake/raw",
        "sinks for stream-7",
        "partition of customers",
        "partition of orders",
        "plans of customers, orders",
        "versions registered under s3://lake/raw",
        "decode warmed up in spark",
        "before stream into raw sink",
        "source",
        "query over kinesis envelope: {'checkpoint_dir': 's3://lake/checkpoints/job', "
        "'trigger': 'processing-time', 'interval': '2 minutes', 'query_name': 'job', 'raw_root': 's3://lake/raw', "
        "'catalog': None}",
    ]
    assert (started.query, started.pipeline.quarantine, started.source) == ("query", "quarantine", "kinesis envelope")


class WarmingRecordedSink:
    """A raw sink that can warm its write path up (raw_format.WarmingSink), saying when."""

    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def write(self, changes, contract, batch_id, rows=None):
        raise AssertionError("no batch runs in these tests")

    def warm_up(self, spark):
        self.steps.append(f"raw sink warmed up in {spark}")

    def __str__(self) -> str:
        return "warming sink"


@pytest.mark.parametrize(("trigger", "warmed"), [("processing-time", True), ("available-now", False)])
def test_a_stream_that_waits_for_files_warms_its_sink_up_once_checked_before_anything_is_written(
    steps, trigger, warmed
):
    """Issue 46: the first Hudi write's one-off cost is paid before the query takes its
    first file; an available-now stream's files are already there, so it would only be
    paid earlier."""
    ends = RecordedEnds(steps)
    ends.trigger = trigger
    ends.sinks = lambda spark, contracts, stream_id: (WarmingRecordedSink(steps), "quarantine")

    startup.start_stream("spark", ends, {"customers": load_contracts()["customers"]}, print,
                         before_stream=lambda pipeline: steps.append(f"before stream into {pipeline.sink}"))

    expected = [*(["decode warmed up in spark", "raw sink warmed up in spark"] if warmed else []),
                "before stream into warming sink", "source"]
    after_checks = steps.index("versions registered under s3://lake/raw") + 1
    assert steps[after_checks:after_checks + len(expected)] == expected
    assert sum(step.startswith("raw sink warmed up") for step in steps) == warmed


@pytest.mark.parametrize(("sink", "told"), [
    (WarmingRecordedSink, "the decode, and the raw sink's write path"),
    (lambda steps: "raw sink", "the decode"),
])
def test_the_warm_up_says_what_it_warmed(steps, sink, told):
    """A sink that cannot warm up (the Parquet sink) is not said to have."""
    ends = RecordedEnds(steps)
    ends.sinks = lambda spark, contracts, stream_id: (sink(steps), "quarantine")
    said: list[str] = []

    startup.start_stream("spark", ends, {"customers": load_contracts()["customers"]}, said.append)

    assert [line.split(": ", 1)[1] for line in said if line.startswith("warmed up in ")] == [told]


def test_a_warm_up_that_fails_is_reported_and_the_stream_starts(steps, monkeypatch):
    """The warm-up only moves one-off costs ahead of the first file: its failure is told
    and the query still starts, whose first batch then pays them."""
    def fails(pipeline, spark):
        raise RuntimeError("scratch folder not writable\n(a Java stack)")

    monkeypatch.setattr(startup.Pipeline, "warm_up", fails)
    said: list[str] = []

    started = startup.start_stream("spark", RecordedEnds(steps), {"customers": load_contracts()["customers"]},
                                   said.append)

    assert said == ["warm-up failed, so the first batch pays its one-off costs: RuntimeError: "
                    "scratch folder not writable"]
    assert started.query == "query" and steps[-1].startswith("query over kinesis envelope")


def test_a_stream_id_claimed_beforehand_skips_the_claim_and_its_contract_check(steps):
    contracts = {"customers": load_contracts()["customers"]}

    startup.start_stream("spark", RecordedEnds(steps), contracts, print, stream_id="claimed-before-spark")

    assert steps[:2] == ["sinks for claimed-before-spark", "partition of customers"]
    assert "stream id" not in steps and not any(step.startswith("contracts") for step in steps)


def test_a_start_that_dies_before_spark_planned_registers_nothing_so_the_next_start_compares_with_the_rows_version(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 30: version 2 of a contract (an added attribute) is started on a raw table that
    holds version 1's rows, and Spark never starts. Version 2 must stay unregistered: no
    row was written under it, so a version 3 that names its column otherwise is an
    addition to version 1, not a rename of version 2's column."""
    layout = DataLayout(tmp_path / "data")
    layout.landing.mkdir(parents=True)
    (layout.landing / "changes.jsonl").write_text("{}\n", encoding="utf-8")
    written = {"customers": load_contracts()["customers"]}
    registry = ContractRegistry(layout.raw)
    checked_and_registered(registry, written, datetime(2026, 11, 27, tzinfo=timezone.utc))
    # Rows in the current-state folder: the registry sees them, and with no change-log batch
    # the stream identity has no checkpoint to ask for.
    (layout.raw / "customers").mkdir(parents=True)
    (layout.raw / "customers" / "part-0.parquet").write_bytes(b"rows of version 1")

    def customers_with(column: str) -> Path:
        document = yaml.safe_load((SAMPLE_CONTRACTS_DIR / "customers.yml").read_text(encoding="utf-8"))
        document["attributes"]["nickname"] = {"type": "S", "column": column, "description": "What friends say."}
        return write_contract(tmp_path / column, document, "customers.yml").parent

    def java_missing(*args, **kwargs):
        raise SparkStartError("Java exited before Spark started")

    monkeypatch.setattr(stream_operation, "session_for", java_missing)
    with pytest.raises(SparkStartError):
        stream_operation.stream(layout, contracts_dir=str(customers_with("nickname")), out=lambda _: None)

    assert registry.latest("customers")["version"] == contract_version(written["customers"])
    reported: list[str] = []
    third = load_contracts(customers_with("nick_name"))
    startup.check_contract_changes(layout.raw, third, reported.append)
    assert reported == [f"raw table 'customers' contract {contract_version(written['customers'])} -> "
                        f"{contract_version(third['customers'])}: attribute 'nickname': absent -> column "
                        "'nick_name' (S) (null in rows written before)"]


@pytest.mark.parametrize("catalog", ["hms://127.0.0.1:9083", "thrift://127.0.0.1", "127.0.0.1:9083",
                                     "thrift://127.0.0.1:9083/raw"])
def test_a_catalog_that_is_no_metastore_address_is_refused_before_spark_starts(catalog):
    with pytest.raises(startup.StartupError, match=r"give a Hive metastore as thrift://host:port"):
        startup.StreamOptions(catalog=catalog)


def test_a_catalog_is_refused_for_the_parquet_change_log_which_no_catalog_holds(tmp_path):
    with pytest.raises(startup.StartupError, match=r"only Hudi tables are synced to a catalog"):
        startup.local_sinks(None, DataLayout(tmp_path), load_contracts(), "parquet", "stream-7",
                            metastore_uri="thrift://127.0.0.1:9083")


def raw_table_files(raw: Path) -> dict[str, tuple[int, int]]:
    """Every file of the raw tables (not the `_` folders beside them), with its size and
    modification time."""
    return {path.relative_to(raw).as_posix(): (path.stat().st_size, path.stat().st_mtime_ns)
            for table in raw.iterdir() if not table.name.startswith("_")
            for path in table.rglob("*") if path.is_file()}


def test_a_hudi_stream_warms_up_on_scratch_tables_and_a_restart_after_a_kill_in_it_lands_every_row_once(
    hudi_spark, tmp_path, monkeypatch, two_table_contracts
):
    """Issue 46 end to end: a processing-time Hudi stream's first commits are the warm-up's
    on scratch tables, before its query starts; a start killed in the warm-up leaves only
    scratch tables (here one put there by hand), which the next start removes without
    changing a file of the raw tables, and every change lands once."""
    from lakehouse_dbt.hudi_raw import read_hudi_snapshot
    from streaming.io.formats.hudi.sink import WARM_UP_FOLDER, WARM_UP_TABLE
    from streaming.samples.generator import generate_cdc

    layout = DataLayout(tmp_path / "data")
    layout.landing.mkdir(parents=True)
    events: list[str] = []

    def recorded_commits(raw_sink, quarantine):
        write = raw_sink._writer

        def recorded(frame, options, path):
            write(frame, options, path)
            events.append(Path(path).relative_to(layout.raw).as_posix())

        raw_sink._writer = recorded
        return raw_sink, quarantine

    run_stream = startup.run_stream
    files_at_query_start: list[dict[str, tuple[int, int]]] = []

    def recorded_start(spark, pipeline, source, **where):
        events.append("query started")
        files_at_query_start.append(raw_table_files(layout.raw))
        return run_stream(spark, pipeline, source, **where)

    monkeypatch.setattr(startup, "run_stream", recorded_start)
    ends = startup.LandingFiles(layout, layout.landing, startup.StreamOptions(
        trigger="processing-time", interval="1 second", sink="hudi", query_name="warmed_up_stream"))
    landed: list[str] = []

    def stream_file(seed: int) -> None:
        lines = generate_cdc(seed=seed, customers=3, duplicate_rate=0.0, malformed_rate=0.0).records
        (layout.landing / f"cdc-{seed}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        landed.extend(json.loads(line)["eventID"] for line in lines)
        events.clear()
        query = startup.start_stream(hudi_spark, ends, two_table_contracts, print, wrap_sinks=recorded_commits).query
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    scratch = f"{TEMPORARY_FOLDER}/{WARM_UP_FOLDER}"
    warm_up = [f"{scratch}/{WARM_UP_TABLE}_changes", f"{scratch}/{WARM_UP_TABLE}", f"{scratch}/{WARM_UP_TABLE}"]
    stream_file(1)
    assert events[:4] == [*warm_up, "query started"]
    assert sorted(events[4:]) == ["customers", "customers_changes", "orders", "orders_changes"]

    # A scratch table a start killed in its warm-up left (any Hudi table stands in for it).
    shutil.copytree(layout.raw / "customers", layout.raw / scratch / WARM_UP_TABLE)
    before_restart = raw_table_files(layout.raw)
    stream_file(2)
    assert events[:4] == [*warm_up, "query started"]
    assert files_at_query_start[-1] == before_restart
    assert not (layout.raw / scratch).exists()
    event_ids = [event_id for table in ("customers_changes", "orders_changes")
                 for event_id in read_hudi_snapshot(str(layout.raw / table), columns=["_event_id"])
                 .column("_event_id").to_pylist()]
    assert sorted(event_ids) == sorted(landed)
