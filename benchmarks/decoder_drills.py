"""Decoder fuzz drill and the ordering property test (in-process Spark)."""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from benchmarks.fuzz import FuzzRecord, base_records, hostile_records
from benchmarks.rows import QUARANTINE_FILE_GLOB, batch_files
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io import layout as raw_layout
from streaming.io.landing_reader import is_utf8
from streaming.io.layout import DataLayout
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sources import landing_files_batch
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import ENVELOPE_SCHEMA

MARKER = re.compile(r"fz(\d{6})z")


def _column(folder: Path, name: str, pattern: str = raw_layout.CHANGE_LOG_FILE_GLOB) -> list[Any]:
    values: list[Any] = []
    for _, path in batch_files(folder, pattern):
        values += pq.read_table(path, columns=[name]).column(name).to_pylist()
    return values


def _text_column_bytes(folder: Path, name: str, pattern: str) -> list[bytes | None]:
    """A string column read as bytes: Spark passes invalid UTF-8 of a landing file
    through to Parquet unchanged, which strict readers refuse to decode."""
    values: list[bytes | None] = []
    for _, path in batch_files(folder, pattern):
        values += pq.read_table(path, columns=[name]).column(name).cast(pa.binary()).to_pylist()
    return values


def fuzz_drill(spark: SparkSession, work: Path, bad: int, good_customers: int, batches: int, seed: int = 5) -> dict[str, Any]:
    """Good records mixed with hostile ones, over several batches through the real pipeline."""
    hostile = hostile_records(bad, seed=seed)
    good = [json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
            for records in base_records(seed + 100, good_customers).values() for record in records]
    lines: list[tuple[bytes, FuzzRecord | None]] = [(record.line, record) for record in hostile] + [(line, None) for line in good]
    random.Random(seed).shuffle(lines)
    landing = DataLayout(work).landing
    landing.mkdir(parents=True, exist_ok=True)
    per_batch = -(-len(lines) // batches)
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    pipeline = Pipeline(contracts, LocalParquetSink(str(work)), QuarantineWriter(str(work)))
    failures, records_in = [], 0
    for batch_id in range(batches):
        path = landing / f"fuzz-{batch_id:02d}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line, _ in lines[batch_id * per_batch:(batch_id + 1) * per_batch]))
        try:
            records_in += pipeline.process_batch(landing_files_batch(spark, str(path)), batch_id).records_in
        except Exception as exc:  # the drill reports any failure of a batch instead of stopping
            failures.append(f"batch {batch_id}: {type(exc).__name__}: {str(exc)[:500]}")

    quarantine = DataLayout(work).quarantine
    reasons_by_marker: dict[int, list[str]] = {}
    unmarked_quarantined = 0
    empty_reasons = 0
    payloads = _text_column_bytes(quarantine, "payload", QUARANTINE_FILE_GLOB)
    invalid_utf8_payloads = sum(1 for payload in payloads if payload is not None and not is_utf8(payload))
    for payload, reason in zip(payloads, _column(quarantine, "reason", QUARANTINE_FILE_GLOB)):
        if not reason:
            empty_reasons += 1
        match = MARKER.search((payload or b"").decode("utf-8", errors="replace"))
        if match:
            reasons_by_marker.setdefault(int(match.group(1)), []).append(reason)
        else:
            unmarked_quarantined += 1
    landed_markers: Counter[int] = Counter()
    unmarked_landed = 0
    for contract in contracts.values():
        for event_id in _column(raw_layout.change_log_dir(DataLayout(work).raw, contract), "_event_id"):
            match = MARKER.fullmatch(event_id or "")
            if match:
                landed_markers[int(match.group(1))] += 1
            else:
                unmarked_landed += 1

    by_kind: dict[str, dict[str, Any]] = {}
    wrong: dict[str, list[str]] = {"quarantine": [], "land": []}
    for number, record in enumerate(hostile):
        reasons = reasons_by_marker.get(number, [])
        landed = landed_markers.get(number, 0)
        kind = by_kind.setdefault(record.kind, {"expect": record.expect, "records": 0, "quarantined": 0,
                                                 "landed": 0, "reasons": Counter()})
        kind["records"] += 1
        kind["quarantined"] += len(reasons)
        kind["landed"] += landed
        kind["reasons"].update(reasons)
        if record.expect == "quarantine":
            ok = len(reasons) == 1 and landed == 0 and (
                record.reason_prefix is None or reasons[0].startswith(record.reason_prefix))
        else:
            ok = landed == 1 and not reasons
        if not ok:
            wrong[record.expect].append(f"{record.kind} #{number}: quarantined {reasons}, landed {landed}")
    for kind in by_kind.values():
        kind["reasons"] = dict(kind["reasons"])
    expected_in = len(lines)
    malformed = sum(record.expect == "quarantine" for record in hostile)
    checks = {
        "no_batch_failed": not failures,
        "every_record_read": records_in == expected_in,
        "every_quarantine_row_has_a_reason": empty_reasons == 0,
        "every_malformed_record_quarantined_with_its_reason": not wrong["quarantine"],
        "every_hostile_valid_record_landed": not wrong["land"],
        "every_good_record_landed": unmarked_landed == len(good) and unmarked_quarantined == 0,
    }
    wrong_count = sum(len(items) for items in wrong.values())
    return {
        "passed": all(checks.values()),
        "checks": len(hostile) + len(good),
        "summary": f"{malformed} malformed ({len({r.kind for r in hostile if r.expect == 'quarantine'})} kinds), "
                   f"{len(good)} good, {sum(r.expect == 'land' for r in hostile)} hostile-valid; {wrong_count} wrong",
        "check_results": checks,
        "records_in": records_in,
        "good_records": len(good),
        "good_landed": unmarked_landed,
        "good_quarantined": unmarked_quarantined,
        "batch_failures": failures,
        # Quarantine rows whose payload string is not valid UTF-8 (copied from the landing file as is).
        "quarantine_payloads_with_invalid_utf8": invalid_utf8_payloads,
        "wrong": {expect: items[:30] for expect, items in wrong.items()},
        "kinds": by_kind,
    }


# --------------------------------------------------------------------------- property test

_BASE = datetime(2026, 3, 1, tzinfo=timezone.utc)


def key_history_records(ops_per_key: list[list[str]]) -> tuple[list[tuple[int, int, str]], dict[str, str | None]]:
    """DynamoDB Streams records of each key's in-order history, and the final state per key.

    `ops_per_key[k]` is a list of "PUT"/"REMOVE"; a PUT on an absent item is an INSERT,
    otherwise a MODIFY; a REMOVE of an absent item does not happen in DynamoDB and is a PUT.
    Returns (key, event index, record) triples and `{id: email or None}`.
    """
    records: list[tuple[int, int, str]] = []
    final: dict[str, str | None] = {}
    for key, ops in enumerate(ops_per_key):
        item_id = f"prop-{key:02d}"
        keys = {"id": {"S": item_id}, "custName": {"S": "N"}}
        state: dict[str, Any] | None = None
        for index, op in enumerate(ops):
            at = _BASE + timedelta(seconds=index * 5 + key)
            stream: dict[str, Any] = {"ApproximateCreationDateTime": int(at.timestamp()), "Keys": keys,
                                      "SequenceNumber": str(10**21 + key * 1000 + index), "StreamViewType": "NEW_AND_OLD_IMAGES"}
            if op == "REMOVE" and state is not None:
                name, stream["OldImage"], state = "REMOVE", state, None
            else:
                name = "INSERT" if state is None else "MODIFY"
                new = {**keys, "email": {"S": f"k{key}-e{index}@example.org"}}
                if state is not None:
                    stream["OldImage"] = state
                stream["NewImage"] = state = new
            record = {"eventID": f"prop-k{key}-e{index}", "eventName": name, "eventSource": "aws:dynamodb",
                      "dynamodb": stream,
                      "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/customers/stream/x"}
            records.append((key, index, json.dumps(record, separators=(",", ":"))))
        final[item_id] = None if state is None else state["email"]["S"]
    return records, final


def delivered_events(batches: list[list[str]]) -> list[Counter[str]]:
    """What each batch's change log must hold: every distinct event delivered in it, once."""
    return [Counter({json.loads(line)["eventID"]: 1 for line in lines}) for lines in batches]


def raw_final_state(spark: SparkSession, batches: list[list[str]]) -> tuple[dict[str, str | None], list[Counter[str]]]:
    """Each batch's change-log rows as the pipeline makes them, then the latest row per key
    over all batches (the current state a Hudi upsert or dbt's view derives from the change
    log). Also returns the event ids of each batch's change-log rows, with their counts."""
    from functools import reduce

    from pyspark.sql import DataFrame

    from streaming.pipeline.batch import to_change_log_rows
    from streaming.pipeline.decode import decode_batch
    from streaming.pipeline.ordering import latest_per_key

    # The customers' contract alone: every record here is a customers change, and each
    # further contract only adds Spark planning to each batch's decode.
    contract = load_contracts(SAMPLE_CONTRACTS_DIR)["customers"]
    contracts = {"customers": contract}
    per_batch = []
    for batch_id, lines in enumerate(batches):
        envelope = spark.createDataFrame([(line, None, f"property-{batch_id}") for line in lines], ENVELOPE_SCHEMA)
        decoded, _ = decode_batch(envelope, contracts)
        per_batch.append(to_change_log_rows(decoded["customers"], contract, _BASE + timedelta(hours=batch_id), batch_id))
    change_log = reduce(DataFrame.unionByName, per_batch).select(
        *contract.key_columns, "email", "_is_deleted", "_ordering_value", "_event_id", "_batch_id").cache()
    try:
        latest = latest_per_key(change_log, contract).collect()
        events: list[Counter[str]] = [Counter() for _ in batches]
        for row in change_log.select("_batch_id", "_event_id").collect():
            events[row["_batch_id"]][row["_event_id"]] += 1
    finally:
        change_log.unpersist()
    return {row["id"]: None if row["_is_deleted"] else row["email"] for row in latest}, events


def staging_final_state(spark: SparkSession, batches: list[list[str]],
                        data_dir: Path) -> tuple[dict[str, str | None], list[Counter[str]]]:
    """The same batches through the pipeline's local sink, then dbt's stg_dynamodb__customers.
    Also returns the event ids the sink's change-log files hold per batch, with their counts."""
    import duckdb

    from streaming.runtime.dbt_runner import run_dbt

    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    clock_ticks = iter(_BASE + timedelta(hours=tick) for tick in range(10_000))
    pipeline = Pipeline(contracts, LocalParquetSink(str(data_dir)), QuarantineWriter(str(data_dir)),
                        clock=lambda: next(clock_ticks))
    for batch_id, lines in enumerate(batches):
        envelope = spark.createDataFrame([(line, None, f"property-{batch_id}") for line in lines], ENVELOPE_SCHEMA)
        pipeline.process_batch(envelope, batch_id)
    events: list[Counter[str]] = [Counter() for _ in batches]
    for batch_id, path in batch_files(raw_layout.change_log_dir(DataLayout(data_dir).raw, contracts["customers"])):
        events[batch_id].update(pq.read_table(path, columns=["_event_id"]).column("_event_id").to_pylist())
    result = run_dbt(["run", "--select", "stg_dynamodb__customers"], data_dir)
    if not result.success:
        raise RuntimeError(f"dbt run of stg_dynamodb__customers failed: {result.exception}")
    with duckdb.connect(str(DataLayout(data_dir).dbt_database), read_only=True) as con:
        rows = con.sql("select id, email, is_deleted from lakehouse_staging.stg_dynamodb__customers").fetchall()
    return {item_id: None if deleted else email for item_id, email, deleted in rows}, events


def property_drill(spark: SparkSession, work: Path, examples: int, staging_examples: int) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    outcomes: list[dict[str, Any]] = []
    staging_dirs = iter(work / f"staging-{n:02d}" for n in range(1000))

    # No shrinking: each example costs Spark jobs, and the failing example is reported as drawn.
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(data=st.data())
    def interleaving_converges(data: st.DataObject) -> None:
        ops = data.draw(st.lists(st.lists(st.sampled_from(["PUT", "REMOVE"]), min_size=1, max_size=5),
                                 min_size=1, max_size=3), label="histories")
        records, expected = key_history_records(ops)
        deliveries = [line for _, _, line in records]
        deliveries += data.draw(st.lists(st.sampled_from(deliveries), max_size=4), label="redelivered")
        order = data.draw(st.permutations(deliveries), label="arrival order")
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3), label="batch cuts"))
        bounds = [0, *[cut for cut in cuts if cut < len(order)], len(order)]
        batches = [order[start:end] for start, end in zip(bounds, bounds[1:]) if end > start]
        expected_events = delivered_events(batches)
        raw_state, raw_events = raw_final_state(spark, batches)
        outcome = {"keys": len(ops), "events": len(records), "deliveries": len(order), "batches": len(batches),
                   "raw_ok": raw_state == expected, "change_log_ok": raw_events == expected_events}
        if len([o for o in outcomes if "staging_ok" in o]) < staging_examples:
            staging_state, sink_events = staging_final_state(spark, batches, next(staging_dirs))
            outcome["staging_ok"] = staging_state == expected
            outcome["sink_change_log_ok"] = sink_events == expected_events
        outcomes.append(outcome)
        assert outcome["raw_ok"], f"raw final state {raw_state} != in-order state {expected}"
        assert outcome["change_log_ok"], f"change-log events per batch {raw_events} != delivered {expected_events}"
        assert outcome.get("staging_ok", True), f"staging final state differs from in-order state {expected}"
        assert outcome.get("sink_change_log_ok", True), (
            f"the sink's change-log events per batch {sink_events} != delivered {expected_events}")

    failure = None
    try:
        interleaving_converges()
    except AssertionError as exc:
        failure = str(exc)[:2000]
    staged = [o for o in outcomes if "staging_ok" in o]
    return {
        "passed": failure is None,
        "checks": len(outcomes),
        "summary": f"{len(outcomes)} examples through the change log (each distinct event once per batch, "
                   f"latest per key = in-order state), {len(staged)} also through the sink and stg_dynamodb__customers",
        "failure": failure,
        "examples": outcomes,
    }
