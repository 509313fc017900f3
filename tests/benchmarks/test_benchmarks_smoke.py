"""The benchmark and drill harness computes what it claims (no timings asserted).

Pure checks run in well under a second each; the one Spark check (marked `spark`, the
slow path, ~10-30 s on a loaded 2-core machine) runs the real job and plain copy
in-process on the session's SparkSession.
"""
from __future__ import annotations

import glob
import json
import shutil
import statistics
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import cases
from benchmarks.cases import KillPlan, run_copy, run_stream_job
from benchmarks.datasets import generate_landing, prefix_set
from benchmarks.dbt_bench import write_raw_changes
from benchmarks.decoder_drills import delivered_events, key_history_records, raw_final_state
from benchmarks.figures import batch_growth, percentile, throughput_figures
from benchmarks.freshness import RawWatcher, file_prefix
from benchmarks.fuzz import BAD_PREFIX, hostile_records
from benchmarks.routing_cost import APP_CONTRACT, flat_contract, routing_figures, write_contract_dirs
from benchmarks.rows import compare_data_dirs, data_dir_rows, staged_leftovers
from benchmarks.run import folder_name
from streaming.contracts.evolution import contract_version
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contract_file, load_contracts
from streaming.contracts.model import INGEST_HOUR_COLUMN, TableContract, ingest_hour
from streaming.contracts.spark_schema import change_log_schema
from streaming.io import layout as raw_layout
from streaming.runtime.stream_identity import read_identity


@pytest.mark.spark
def test_job_and_copy_rates_are_positive_the_ratio_is_theirs_and_the_flat_variant_lands_the_same(spark, tmp_path: Path) -> None:
    landing = generate_landing(tmp_path / "landing", 30, records_per_file=200, seed=3)
    job = run_stream_job(spark, {"data_dir": str(tmp_path / "job"), "landing_dir": str(landing.root),
                                 "query_name": "bench_smoke"})
    copy = run_copy(spark, {"landing_dir": str(landing.root), "out_dir": str(tmp_path / "copy"), "format": "text"})

    # The job read every landed record and accounted for each one: it landed as a distinct
    # change, was quarantined, or was a second copy of a change in its batch.
    assert job["records_in"] == landing.records == spark.read.parquet(str(tmp_path / "copy")).count()
    assert job["landed"] + job["quarantined"] + job["duplicates_dropped"] == job["records_in"]
    assert job["duplicates_dropped"] > 0  # the generator re-delivers some changes
    # What the reports counted as landed is what the change logs hold, in the sink's layout,
    # and the stream started as `lakehouse stream` does: its identity is recorded.
    raw = tmp_path / "job" / "raw"
    change_log_rows = 0
    for contract in load_contracts().values():
        for path in raw_layout.change_log_files(raw_layout.change_log_dir(raw, contract)):
            batch = pq.read_table(path, columns=["_batch_id", "_ingested_at"]).to_pylist()
            change_log_rows += len(batch)
            if not batch:
                continue  # Spark's first write task leaves a file even when its share of rows is empty
            assert {row["_batch_id"] for row in batch} == {int(path.parent.name.split("=")[1])}
            assert {raw_layout.hour_folder_of(row["_ingested_at"]) for row in batch} == {
                path.parent.parent.name}
    assert change_log_rows == job["landed"] > 0
    # The set holds every packaged table, the single-table design's entities and unrouted items too.
    assert set(job["landed_by_table"]) == set(load_contracts())
    assert all(rows > 0 for rows in job["landed_by_table"].values()), job["landed_by_table"]
    identity = read_identity(tmp_path / "job")
    assert identity is not None and identity.checkpoint == str((tmp_path / "job" / "checkpoints" / "bench_smoke").resolve())
    # The routing bench's flat variant lands the same records, the app's in one raw table.
    others = [SAMPLE_CONTRACTS_DIR / "customers.yml", SAMPLE_CONTRACTS_DIR / "orders.yml"]
    flat = run_stream_job(spark, {"data_dir": str(tmp_path / "flat"), "landing_dir": str(landing.root),
                                  "contracts_dir": str(write_contract_dirs(tmp_path, others=others)["flat"]),
                                  "query_name": "bench_smoke_flat"})
    app_rows = sum(rows for table, rows in job["landed_by_table"].items() if table.startswith("app_"))
    assert flat["landed_by_table"] == {"customers": job["landed_by_table"]["customers"],
                                       "orders": job["landed_by_table"]["orders"], "app": app_rows}
    assert (flat["quarantined"], flat["duplicates_dropped"]) == (job["quarantined"], job["duplicates_dropped"])
    assert job["cpu_seconds"] > 0 and flat["cpu_seconds"] > 0
    figures = throughput_figures(landing.records, job["seconds"], {"text": copy["seconds"]})
    assert figures["job_events_per_s"] > 0 and figures["copy_events_per_s"]["text"] > 0
    assert figures["ratio_to_copy"]["text"] == pytest.approx(
        figures["job_events_per_s"] / figures["copy_events_per_s"]["text"])
    assert figures["ratio_to_copy"]["text"] == pytest.approx(copy["seconds"] / job["seconds"])


@pytest.mark.spark
def test_the_schema_given_copy_writes_what_the_inferring_copy_writes(spark, tmp_path: Path) -> None:
    # The stricter floor differs from the json copy only by the skipped inference pass.
    landing = generate_landing(tmp_path / "landing", 20, records_per_file=100, seed=5)
    for fmt in ("json", "json-schema"):
        run_copy(spark, {"landing_dir": str(landing.root), "out_dir": str(tmp_path / fmt), "format": fmt})
    inferred, given = (spark.read.parquet(str(tmp_path / fmt)) for fmt in ("json", "json-schema"))
    assert given.schema == inferred.schema
    assert given.count() == inferred.count() == landing.records
    assert given.exceptAll(inferred).count() == 0


@pytest.mark.spark
def test_the_stage_profile_covers_every_stage_and_leaves_the_decode_whole(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from benchmarks.stages import STAGES, profile_stages
    from streaming.contracts.loader import load_contracts
    from streaming.io.sources import landing_files_batch
    from streaming.pipeline import decode

    landing = generate_landing(tmp_path / "landing", 20, records_per_file=100, seed=9)
    # The app contract alone (its entities and unrouted table: four raw tables instead of
    # six), the only one whose generated items carry undeclared attributes (the other
    # tables' records are quarantined, which the profile counts like any record).
    contracts_dir = tmp_path / "contracts"
    contracts_dir.mkdir()
    shutil.copy(SAMPLE_CONTRACTS_DIR / "app.yml", contracts_dir)
    profile = profile_stages(spark, {"landing_dir": str(landing.root), "work_dir": str(tmp_path / "work"), "rounds": 1,
                                     "contracts_dir": str(contracts_dir)})

    assert profile["records"] == landing.records
    assert set(profile["us_per_record"]) == set(STAGES) == set(profile["seconds"])
    assert profile["process_batch_seconds"] > 0
    # The typing-only variant swaps the extras out for its run alone. (The decoded records
    # kept once, as process_batch keeps them, for the four raw tables' counts.)
    contracts = load_contracts(contracts_dir)
    with decode.decoded_and_kept(landing_files_batch(spark, str(landing.root)), contracts) as (tables, _):
        assert sum(rows.where(F.col("_extra_attributes").isNotNull()).count() for rows in tables.values()) > 0


@pytest.mark.spark
def test_property_drill_change_log_holds_each_batch_s_distinct_events_and_converges(spark) -> None:
    records, expected = key_history_records([["PUT", "PUT", "REMOVE"], ["PUT", "PUT"]])
    k0e0, k0e1, k0e2, k1e0, k1e1 = (line for _, _, line in records)
    # Key 0's history arrives backwards over two batches; its REMOVE is delivered twice in
    # batch 0 and once more in batch 1.
    batches = [[k0e2, k1e0, k0e2, k1e1], [k0e1, k0e0, k0e2]]
    state, events = raw_final_state(spark, batches)
    assert expected == {"prop-00": None, "prop-01": "k1-e1@example.org"}
    assert state == expected
    assert events == delivered_events(batches) == [
        Counter({"prop-k0-e2": 1, "prop-k1-e0": 1, "prop-k1-e1": 1}),
        Counter({"prop-k0-e1": 1, "prop-k0-e0": 1, "prop-k0-e2": 1}),
    ]


def test_the_flat_twin_of_the_app_contract_types_every_entity_attribute_in_one_raw_table(tmp_path: Path) -> None:
    routed = load_contract_file(APP_CONTRACT)
    (flat,) = load_contract_file(write_contract_dirs(tmp_path)["flat"] / "app.yml")

    assert (flat.table, flat.raw_table, flat.is_routed) == ("app", "app", False)
    assert (flat.key_attributes, flat.partition_expression) == (routed[0].key_attributes, routed[0].partition_expression)
    by_name = {spec.name: spec for contract in routed for spec in contract.attributes}
    assert {spec.name: spec for spec in flat.attributes} == by_name
    assert {"email", "amount", "lines", "plan"} <= set(by_name)
    assert flat.pii_columns == ("email",)
    with pytest.raises(ValueError, match="declares no entities"):
        flat_contract({"table": "customers", "attributes": {}})
    clash = {"table": "t", "attributes": {}, "entities": {"a": {"attributes": {"x": {"type": "S"}}},
                                                          "b": {"attributes": {"x": {"type": "N"}}}}}
    with pytest.raises(ValueError, match="entity 'b' declares 'x' unlike another entity"):
        flat_contract(clash)


def test_the_routing_share_is_taken_from_each_variant_s_fastest_run() -> None:
    def run(seconds: float, cpu_seconds: float = 1.0, landed: int = 90) -> dict:
        return {"seconds": seconds, "cpu_seconds": cpu_seconds, "records_in": 100, "landed": landed,
                "quarantined": 2, "duplicates_dropped": 8}

    figures = routing_figures({"routed": [run(12.0, 15.0), run(10.0, 16.0)], "flat": [run(9.0, 12.5), run(9.5, 12.0)]})
    assert (figures["routed_seconds"], figures["flat_seconds"]) == (10.0, 9.0)
    assert figures["routing_share"] == pytest.approx(0.1)
    assert figures["routed_over_flat"] == pytest.approx(10 / 9)
    assert (figures["routed_cpu_seconds"], figures["flat_cpu_seconds"]) == (15.0, 12.0)
    assert figures["routing_cpu_share"] == pytest.approx(0.2)
    with pytest.raises(RuntimeError, match="differ in landed"):
        routing_figures({"routed": [run(10.0)], "flat": [run(9.0, landed=89)]})


def test_micro_batch_data_folders_carry_no_glob_characters() -> None:
    # The sink globs below its data directory (Hadoop's globStatus): `local[2]` would be a pattern.
    assert folder_name("local[2]") == "local-2"
    assert glob.escape(folder_name("local[*]")) == folder_name("local[*]") == "local"


def test_prefix_sets_hold_the_requested_records(tmp_path: Path) -> None:
    base = generate_landing(tmp_path / "base", 2_000, records_per_file=250, seed=4)
    counted = sum(len([line for line in f.path.read_text().splitlines() if line.strip()]) for f in base.files)
    assert base.records == counted
    prefix = prefix_set(base, 1_000, tmp_path / "prefix")
    assert 1_000 <= prefix.records < 1_250
    assert [f.path.read_bytes() for f in prefix.files] == [f.path.read_bytes() for f in base.files[:len(prefix.files)]]


def test_batch_growth_separates_flat_from_growing_cost() -> None:
    flat = [9.0] + [1.0, 1.1, 0.9, 1.0] * 5  # batch 0 pays the warm-up and is left out
    growing = [9.0] + [1.0 + 0.1 * n for n in range(20)]
    assert batch_growth(flat, window=5)["last_over_first"] == pytest.approx(1.0)
    assert abs(batch_growth(flat, window=5)["slope_s_per_batch"]) < 0.01
    grown = batch_growth(growing, window=5)
    assert grown["slope_s_per_batch"] == pytest.approx(0.1)
    assert grown["last_over_first"] == pytest.approx((sum(2.5 + 0.1 * n for n in range(5)) / 5) / 1.2)


def test_the_sinks_option_picks_the_throughput_sinks_and_refuses_others() -> None:
    from benchmarks.run import build_parser, plan_from_args

    assert plan_from_args(build_parser().parse_args([])).sinks == ("parquet",)
    assert plan_from_args(build_parser().parse_args(["--sinks", "parquet,hudi"])).sinks == ("parquet", "hudi")
    with pytest.raises(SystemExit, match="--sinks"):
        plan_from_args(build_parser().parse_args(["--sinks", "parquet,delta"]))


def test_the_hudi_lens_takes_shares_from_the_reference_s_fastest_batch_and_refuses_unequal_landings() -> None:
    from benchmarks.run import hudi_lines
    from benchmarks.stages import HUDI_REFERENCE, hudi_figures

    def batch(seconds: float, insert_s: float, upsert_s: float, landed: int = 7) -> dict:
        commits = [{"table": "customers_changes", "operation": "insert", "seconds": insert_s, "jobs": 3},
                   {"table": "customers", "operation": "upsert", "seconds": upsert_s, "jobs": 5}]
        return {"seconds": seconds, "landed": {"customers": landed}, "commits": commits,
                "files_written": {"customers": 1}, "markers_kept": True,
                "before_first_commit_seconds": seconds - insert_s - upsert_s, "batch_jobs": 4}

    figures = hudi_figures(100, {HUDI_REFERENCE: [batch(12.0, 3.0, 6.0), batch(10.0, 2.0, 5.0)],
                                 "as configured": [batch(8.0, 2.0, 5.0)], "direct markers": [batch(6.0, 1.0, 4.0)]})
    assert figures["best_seconds"] == {HUDI_REFERENCE: 10.0, "as configured": 8.0, "direct markers": 6.0}
    assert figures["over_reference"]["as configured"] == pytest.approx(0.8)
    # A lever is one option changed against the sink as configured.
    assert figures["over_as_configured"]["direct markers"] == pytest.approx(0.75)
    assert figures["before_first_commit_seconds"]["direct markers"] == pytest.approx(1.0)
    assert figures["hudi_share"] == pytest.approx(0.7)
    customers = figures["tables"]["customers"]
    assert (customers["insert"]["share"], customers["upsert"]["share"]) == (pytest.approx(0.2), pytest.approx(0.5))
    assert any("as configured: 8.0s: 0.80 x 'one table at a time'" in line for line in hudi_lines(figures))
    assert any("direct markers: 6.0s: 0.60 x 'one table at a time', 0.75 x 'as configured'; "
               "1.0s before its first commit" in line for line in hudi_lines(figures))
    # Levers run against the sink as configured alone, without the reference.
    levers = hudi_figures(100, {"as configured": [batch(8.0, 2.0, 5.0)], "direct markers": [batch(6.0, 1.0, 4.0)]})
    assert any("direct markers: 6.0s: 0.75 x 'as configured'" in line for line in hudi_lines(levers))
    with pytest.raises(RuntimeError, match="landed different rows"):
        hudi_figures(100, {HUDI_REFERENCE: [batch(10.0, 2.0, 5.0)], "as configured": [batch(8.0, 2.0, 5.0, landed=6)]})


def test_the_hudi_tables_section_times_two_commits_per_raw_table(hudi_spark, tmp_path: Path) -> None:
    """The section on Hudi at two raw tables (each commit costs seconds here, and the suite
    has a time budget); its larger configurations differ only in the contracts and the
    landing they are given, checked by the next test."""
    from benchmarks.hudi_tables import contracts_folder, landing_for, measure_table_count

    base = generate_landing(tmp_path / "landing", 300, records_per_file=100, seed=3)
    landing = landing_for(base, 200, 2, tmp_path / "landing-2")
    # No priming batch here (it would double the test's commits): the timed batch's
    # first commit of each table creates it.
    two = measure_table_count(hudi_spark, {
        "landing_dir": str(landing.root), "work_dir": str(tmp_path / "work-2"), "priming_records": 0,
        "contracts_dir": str(contracts_folder(2, tmp_path / "contracts-2"))})

    assert two["records"] == landing.records == 200
    # Every raw table with rows cost its two commits, each holding the batch's marker.
    assert two["raw_tables"] == two["raw_tables_landed"] == 2 and two["commits"] == 4
    assert sorted((c["table"], c["operation"]) for c in two["commit_list"]) == [
        ("customers", "upsert"), ("customers_changes", "insert"), ("orders", "upsert"), ("orders_changes", "insert")]
    assert two["markers_kept"]
    assert 0 < two["commit_span_seconds"] <= two["seconds"]
    assert two["seconds_per_commit"] * two["commits"] == pytest.approx(two["commit_seconds"])
    # The sink as configured: the two tables' commits in flight at once.
    assert any(a["started"] < b["ended"] and b["started"] < a["ended"] and a["table"].removesuffix("_changes")
               != b["table"].removesuffix("_changes") for a in two["commit_list"] for b in two["commit_list"])
    # At two tables the app's records are quarantined (unknown_table).
    app_records = sum(b'"tableName":"app"' in line or b":table/app/stream/" in line
                      for file in landing.files for line in file.path.read_bytes().split(b"\n"))
    assert two["quarantined"] >= app_records > 0


def test_the_hudi_tables_section_gives_12_raw_tables_as_many_records_as_2(spark, tmp_path: Path) -> None:
    from benchmarks.datasets import renamed_record
    from benchmarks.hudi_tables import contracts_folder, landing_for
    from streaming.io.landing_ledger import LandedFile
    from streaming.io.sources import files_envelope
    from pyspark.sql import functions as F

    from streaming.pipeline.decode import decode_records, rows_landing_in

    base = generate_landing(tmp_path / "landing", 300, records_per_file=100, seed=3)
    landing = landing_for(base, 200, 12, tmp_path / "landing-12")
    contracts = load_contracts(contracts_folder(12, tmp_path / "contracts-12"))
    # Half the packaged tables' records and half the same records renamed to their copies,
    # each copy beside its original (so that the bench's priming batch, a prefix, reaches both).
    assert landing.records == landing_for(base, 200, 2, tmp_path / "landing-2").records == 200
    renamed = {table: f"{table}_b" for table in ("customers", "orders", "app")}
    original, copy, *_ = landing.files[0].path.read_bytes().split(b"\n")
    assert copy == renamed_record(original, renamed) != original
    kinesis, streams = (b'{"tableName":"app","x":1}', b'{"eventSourceARN":"arn:aws:dynamodb:r:1:table/orders/stream/l"}')
    assert renamed_record(kinesis, renamed) == b'{"tableName":"app_b","x":1}'
    assert renamed_record(streams, renamed) == b'{"eventSourceARN":"arn:aws:dynamodb:r:1:table/orders_b/stream/l"}'
    # Decoded as the bench's batch is, each copy lands what its original lands.
    files = [LandedFile(f"file:{file.path.resolve()}", file.path.stat().st_size, 0) for file in landing.files]
    lands = rows_landing_in(contracts)
    counts = decode_records(files_envelope(spark, files), contracts).agg(
        *[F.count_if(lands[table]).alias(table) for table in contracts]).collect()[0]
    landed = counts.asDict()
    originals = {table: rows for table, rows in landed.items() if not table.endswith("_b")}
    assert len(landed) == 12 and len(originals) == 6 and all(originals.values())
    assert {f"{table}_b": rows for table, rows in originals.items()} == {
        table: rows for table, rows in landed.items() if table.endswith("_b")}
    # Six raw tables are the packaged contracts.
    assert sorted(load_contracts(contracts_folder(6, tmp_path / "contracts-6"))) == sorted(load_contracts(None))


def test_percentile_agrees_with_the_standard_library() -> None:
    values = [3.2, 0.5, 7.7, 1.1, 4.0, 9.9, 2.2, 5.5, 6.1, 8.3]
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    assert percentile(values, 50) == pytest.approx(statistics.median(values))
    assert percentile(values, 95) == pytest.approx(cuts[18])


_HOUR = "2026-01-01-00"


def _write_changes(data_dir: Path, batch_id: int, rows: list[dict], hour: str = _HOUR) -> Path:
    folder = data_dir / "raw" / "customers_changes" / f"_ingest_hour={hour}" / f"_batch_id={batch_id}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "part-00000.parquet")
    return folder


def test_kill_drill_comparison_detects_a_duplicated_and_a_lost_row(tmp_path: Path) -> None:
    first = {"id": "c1", "email": "a@x", "_ingested_at": datetime(2026, 1, 1, tzinfo=timezone.utc)}
    second = {"id": "c2", "email": "b@x", "_ingested_at": datetime(2026, 1, 1, tzinfo=timezone.utc)}
    rerun = {**first, "_ingested_at": datetime(2026, 1, 2, 5, tzinfo=timezone.utc)}
    _write_changes(tmp_path / "clean", 0, [first, second])
    # Replayed later, in another ingest hour: only _ingested_at and the hour folder differ.
    _write_changes(tmp_path / "same", 0, [rerun, second], hour="2026-01-02-05")
    _write_changes(tmp_path / "broken", 0, [first, first])  # c1 written twice, c2 lost

    reference = data_dir_rows(tmp_path / "clean")
    assert sum(reference["raw/customers_changes"].values()) == 2
    assert all(diff.equal for diff in compare_data_dirs(reference, data_dir_rows(tmp_path / "same")).values())
    broken = compare_data_dirs(reference, data_dir_rows(tmp_path / "broken"))["raw/customers_changes"]
    assert (broken.lost, broken.duplicated, broken.unexpected) == (1, 1, 0)

    _write_changes(tmp_path / "moved", 1, [first, second])  # same rows, other batch: not the same output
    moved = compare_data_dirs(reference, data_dir_rows(tmp_path / "moved"))["raw/customers_changes"]
    assert (moved.lost, moved.unexpected) == (2, 2)

    # A replay that left the first attempt in place under another hour doubles the batch.
    _write_changes(tmp_path / "twice", 0, [first, second])
    _write_changes(tmp_path / "twice", 0, [rerun, second], hour="2026-01-02-05")
    twice = compare_data_dirs(reference, data_dir_rows(tmp_path / "twice"))["raw/customers_changes"]
    assert (twice.lost, twice.duplicated, twice.unexpected) == (0, 2, 0)


def test_kill_drill_reads_committed_folders_only_and_finds_scratch_leftovers(tmp_path: Path) -> None:
    row = {"id": "c1", "email": "a@x", "_ingested_at": datetime(2026, 1, 1, tzinfo=timezone.utc)}
    _write_changes(tmp_path / "clean", 0, [row])
    quarantined = tmp_path / "clean" / "quarantine" / "_batch_id=0"
    quarantined.mkdir(parents=True)
    pq.write_table(pa.table({"reason": ["invalid_json"], "payload": ["{"]}), quarantined / "part-0.parquet")
    reference = data_dir_rows(tmp_path / "clean")
    assert sorted(reference) == ["quarantine", "raw/customers_changes"]
    assert list(reference["quarantine"]) == [(0, "invalid_json", "{")]
    assert staged_leftovers(tmp_path / "clean") == []

    # A batch being written (the sink's scratch folders) and the stream's bookkeeping are no table rows.
    candidate = tmp_path / "candidate"
    shutil.copytree(tmp_path / "clean", candidate)
    scratch = candidate / "raw" / "_tmp" / "customers_changes" / "1" / "staged" / f"_ingest_hour={_HOUR}"
    scratch.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), scratch / "part-00000.parquet")
    (candidate / "_tmp" / "quarantine" / "1").mkdir(parents=True)
    (candidate / "raw" / "_stream.json").write_text("{}")
    assert all(diff.equal for diff in compare_data_dirs(reference, data_dir_rows(candidate)).values())
    assert staged_leftovers(candidate) == [scratch / "part-00000.parquet"]


def test_kill_hook_fires_at_the_planned_write(monkeypatch: pytest.MonkeyPatch) -> None:
    class Killed(Exception):
        pass

    def kill() -> None:
        raise Killed

    monkeypatch.setattr(cases, "_kill_own_process_group", kill)
    mid = KillPlan("1:mid_write")
    mid.before_raw_write(0)
    mid.before_raw_write(0)  # other batches pass
    mid.before_raw_write(1)  # first table of batch 1 is written
    with pytest.raises(Killed):
        mid.before_raw_write(1)
    after = KillPlan("0:after_write")
    after.before_raw_write(0)
    after.before_raw_write(0)
    with pytest.raises(Killed):
        after.after_quarantine_write(0)
    with pytest.raises(ValueError):
        KillPlan("0:sometime")


def test_hudi_kill_hook_fires_after_the_planned_commit_and_inside_one(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    class Killed(Exception):
        pass

    def kill() -> None:
        raise Killed

    monkeypatch.setattr(cases, "_kill_own_process_group", kill)
    commits: list[str] = []
    plan = KillPlan("1:hudi_after_commit:0")
    plan.before_raw_write(0)
    plan.hudi_commit(lambda: commits.append("b0 changes"), str(tmp_path))  # other batches pass
    plan.before_raw_write(1)
    with pytest.raises(Killed):
        plan.hudi_commit(lambda: commits.append("b1 changes"), str(tmp_path))
    assert commits == ["b0 changes", "b1 changes"], "killed once the change log's commit returned"

    # Inside a commit: the watcher kills once the commit's `.inflight` is on the timeline
    # (a completed earlier commit keeps its own `.inflight` file and does not count).
    timeline = tmp_path / "table" / ".hoodie"
    timeline.mkdir(parents=True)
    for name in ("001.commit.requested", "001.inflight", "001.commit"):
        (timeline / name).touch()
    killed = threading.Event()
    monkeypatch.setattr(cases, "_kill_own_process_group", killed.set)
    inside = KillPlan("0:hudi_inflight:1")
    inside.before_raw_write(0)
    inside.hudi_commit(lambda: None, str(tmp_path / "table"))  # commit 0: not planned

    def commit() -> None:
        (timeline / "002.inflight").touch()
        assert killed.wait(5), "no kill while 002 was in flight"
        (timeline / "002.commit").touch()

    inside.hudi_commit(commit, str(tmp_path / "table"))
    assert cases._pending_instants(timeline) == set()


def test_pending_hudi_instants_are_leftovers(tmp_path: Path) -> None:
    timeline = tmp_path / "raw" / "customers_changes" / ".hoodie"
    timeline.mkdir(parents=True)
    for name in ("001.commit.requested", "001.inflight", "001.commit", "002.rollback.requested",
                 "002.rollback.inflight", "002.rollback", "hoodie.properties"):
        (timeline / name).touch()
    assert staged_leftovers(tmp_path) == []
    (timeline / "003.commit.requested").touch()
    (timeline / "003.inflight").touch()
    assert staged_leftovers(tmp_path) == [timeline / "003.commit.requested", timeline / "003.inflight"]


def test_kill_drill_takes_every_way_to_kill_first() -> None:
    import random

    from benchmarks.kill_drill import HOWS, plan_kill, trial_hows

    rng = random.Random(1)
    assert trial_hows("hudi", 3, rng) == ["hudi_after_commit", "hudi_inflight", "hudi_files"]
    assert set(trial_hows("parquet", 12, rng)) <= set(HOWS["parquet"])
    assert plan_kill("hudi_after_commit", rng, 2)[1] == 0, "between the change log's and the current state's commits"
    assert plan_kill("mid_write", rng, 2)[1] is None


def test_the_second_writer_reaches_the_lock_and_is_refused_by_it(tmp_path: Path) -> None:
    # The drill's landing files live beside its data directories, not in them; the second
    # `lakehouse stream` reads only `<data dir>/landing` and must still get as far as the lock.
    from benchmarks.kill_drill import KillSetup, second_writer_attempt, second_writer_data_dir
    from streaming.runtime.data_lock import hold_data_dir

    work = tmp_path / "kill" / "hudi"
    setup = KillSetup(generate_landing(work / "landing", 20, records_per_file=10, seed=3), sink="hudi")
    data_dir = second_writer_data_dir(setup, work / "second_writer")
    assert sorted(path.name for path in (data_dir / "landing").iterdir()) == \
        sorted(path.name for path in setup.landing.root.iterdir())
    with hold_data_dir(data_dir, "stream", report=lambda _: None):  # the first writer, as the stream case holds it
        second = second_writer_attempt(setup, data_dir)
    assert second.returncode == 2, second.stderr
    assert "is being written by" in second.stderr and "no landing files" not in second.stderr
    assert not (data_dir / "raw").exists(), "the refused writer wrote nothing"


def test_fuzz_generator_yields_many_distinct_malformed_kinds() -> None:
    records = hostile_records(1_000)
    malformed = [r for r in records if r.expect == "quarantine"]
    assert len(malformed) >= 900
    assert len({r.kind for r in malformed}) >= 30
    assert len({r.line for r in records}) == len(records)
    assert all(r.marker.encode() in r.line and b"\n" not in r.line for r in records)

    def parses(line: bytes) -> bool:
        try:
            return isinstance(json.loads(line.decode("utf-8")), dict)
        except (UnicodeDecodeError, ValueError):
            return False

    kinds = {r.kind: r for r in records}
    assert not parses(kinds["truncated_json"].line)
    assert not parses(kinds["invalid_utf8_structural"].line)
    # Items of malformed records are told apart from good ones by their key prefix.
    assert BAD_PREFIX.encode() in kinds["string_as_number"].line
    assert '"N":"' + "1" * 39 + '"' in kinds["number_39_digits"].line.decode()


def _sink_file_columns(contract: TableContract) -> list[str]:
    """The columns of the local sink's change-log files: the ingest hour is only their folder."""
    return [name for name in change_log_schema(contract).fieldNames() if name != INGEST_HOUR_COLUMN]


def test_dbt_benchmark_rows_have_the_change_log_layout(tmp_path: Path) -> None:
    ingested = datetime(2026, 1, 10, 7, 30, tzinfo=timezone.utc)
    written = write_raw_changes(tmp_path, 0, 0, 3_000, 1_000, ingested, new_batch=False)
    assert sum(written.values()) == 3_000
    for table in ("customers", "orders"):
        contract = load_contracts()[table]
        (path,) = raw_layout.change_log_files(tmp_path / "raw" / f"{table}_changes")
        assert path.parent == tmp_path / "raw" / f"{table}_changes" / "_ingest_hour=2026-01-10-07" / "_batch_id=0"
        assert pq.read_schema(path).names == _sink_file_columns(contract)
        with duckdb.connect() as con:
            rows, events, winners, batch_ids, versions = con.execute(
                f"select count(*), count(distinct _event_id), count(distinct _ordering_value), "
                f"list(distinct _batch_id), list(distinct _contract_version) from '{path}'").fetchone()
        assert rows == events == winners == written[table]
        assert batch_ids == [0]
        assert versions == [contract_version(contract)]
    assert staged_leftovers(tmp_path) == []


def test_dbt_benchmark_history_batches_each_land_under_their_ingest_hour(tmp_path: Path) -> None:
    first = datetime(2026, 1, 10, tzinfo=timezone.utc)
    written = write_raw_changes(tmp_path, 5, 0, 900, 300, first, new_batch=False, batches=3)
    pattern = f"{tmp_path}/raw/orders_changes/{raw_layout.CHANGE_LOG_FILE_GLOB}"
    with duckdb.connect() as con:
        con.execute("set TimeZone = 'UTC'")
        # Read as dbt's DuckDB source view reads it (macros/raw/register_raw_sources.sql).
        per_batch = con.execute(
            f"select _ingest_hour, _batch_id, min(_ingested_at), max(_ingested_at), count(*) from read_parquet("
            f"'{pattern}', hive_partitioning = true, union_by_name = true, "
            f"hive_types = {{'_batch_id': 'BIGINT', '_ingest_hour': 'VARCHAR'}}) group by all order by 2").fetchall()
    assert [(hour, batch) for hour, batch, *_ in per_batch] == [
        ("2026-01-10-00", 5), ("2026-01-11-00", 6), ("2026-01-12-00", 7)]
    for hour, _, earliest, latest, _ in per_batch:
        assert earliest == latest and ingest_hour(earliest) == hour
    assert sum(count for *_, count in per_batch) == written["orders"]

    # Written again an hour later, batch 7 replaces its earlier folder instead of doubling it.
    again = write_raw_changes(tmp_path, 7, 0, 900, 300, first + timedelta(days=2, hours=1), new_batch=False)
    folders = sorted(path.parent.relative_to(tmp_path / "raw" / "orders_changes").as_posix()
                     for path in raw_layout.change_log_files(tmp_path / "raw" / "orders_changes"))
    assert folders == ["_ingest_hour=2026-01-10-00/_batch_id=5", "_ingest_hour=2026-01-11-00/_batch_id=6",
                       "_ingest_hour=2026-01-12-01/_batch_id=7"]
    assert pq.read_metadata(tmp_path / "raw" / "orders_changes" / folders[2] / "part-0.parquet").num_rows == again["orders"]


def test_freshness_watcher_needs_rows_in_both_tables(tmp_path: Path) -> None:
    watcher = RawWatcher(tmp_path)
    folder = tmp_path / "customers_changes" / f"_ingest_hour={_HOUR}" / "_batch_id=0"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": [f"{file_prefix(2)}cust-000001"]}), folder / "part-0.parquet")
    # Still in the scratch folder: not readable yet.
    staged = tmp_path / "_tmp" / "orders_changes" / "0" / "staged" / f"_ingest_hour={_HOUR}"
    staged.mkdir(parents=True)
    pq.write_table(pa.table({"customer_id": [f"{file_prefix(2)}cust-000001"]}), staged / "part-0.parquet")
    watcher.poll()
    assert watcher.visible_at(2) is None
    folder = tmp_path / "orders_changes" / f"_ingest_hour={_HOUR}" / "_batch_id=0"
    folder.parent.mkdir(parents=True)
    staged.rename(folder)  # the sink's rename into place
    watcher.poll()
    assert watcher.visible_at(2) is not None and watcher.visible_at(3) is None
    assert Counter(prefix for prefix, _ in watcher.first_seen) == {file_prefix(2): 2}


@pytest.mark.dbt
def test_raw_reads_of_a_build_are_counted_from_duckdbs_file_log(tmp_path: Path) -> None:
    """The bench's raw-bytes figure: DuckDB's own log of the reads of the dbt build
    (same process, same database instance), restricted to the raw change logs."""
    from benchmarks.dbt_bench import PRODUCTION_BUILD, STAGING_MODELS, batch_bytes, raw_reads_during

    first = datetime(2026, 1, 10, tzinfo=timezone.utc)
    write_raw_changes(tmp_path, 0, 0, 600, 200, first, new_batch=False, batches=2)

    # The two staging models (which read both change logs), what they are built from and
    # the tests of these alone: the counting is the subject, and the rest of the production
    # build reads what the staging models built.
    staging = [*PRODUCTION_BUILD, "--select", *(f"+{model}" for model in STAGING_MODELS),
               "--indirect-selection", "cautious"]
    build, reads = raw_reads_during(tmp_path, staging)

    assert build["seconds"] > 0
    files = list((tmp_path / "raw").glob(f"*/{raw_layout.CHANGE_LOG_FILE_GLOB}"))
    assert reads["raw_files"] == len(files) == 4
    assert reads["raw_bytes"] == sum(path.stat().st_size for path in files)
    # The two batches, each in both change logs, are all of raw.
    assert 0 < batch_bytes(tmp_path, 0) < reads["raw_bytes"]
    assert batch_bytes(tmp_path, 0) + batch_bytes(tmp_path, 1) == reads["raw_bytes"]
    # A first build reads every raw file, and some of them more than once.
    assert reads["files_read"] == 4 and reads["bytes_read"] >= reads["raw_bytes"] // 2
