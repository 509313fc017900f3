"""Start-up (streaming/runtime/startup.py): one function starts every runner's stream, and
runs its steps in the order its docstring lists whatever the runner's ends are."""
from __future__ import annotations

import pytest

from streaming.contracts.loader import load_contracts
from streaming.runtime import startup


class RecordedEnds:
    """Ends that record what start_stream asks of them."""

    raw_root = "s3://lake/raw"
    checkpoint_dir = "s3://lake/checkpoints/job"
    trigger = "processing-time"
    interval = "2 minutes"
    query_name = "job"

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
        "before stream into raw sink",
        "source",
        "query over kinesis envelope: {'checkpoint_dir': 's3://lake/checkpoints/job', "
        "'trigger': 'processing-time', 'interval': '2 minutes', 'query_name': 'job'}",
    ]
    assert (started.query, started.pipeline.quarantine, started.source) == ("query", "quarantine", "kinesis envelope")


def test_a_stream_id_claimed_beforehand_skips_the_claim_and_its_contract_check(steps):
    contracts = {"customers": load_contracts()["customers"]}

    startup.start_stream("spark", RecordedEnds(steps), contracts, print, stream_id="claimed-before-spark")

    assert steps[:2] == ["sinks for claimed-before-spark", "partition of customers"]
    assert "stream id" not in steps and not any(step.startswith("contracts") for step in steps)
