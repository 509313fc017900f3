"""The function that keeps the streaming job running, against moto's Glue."""
from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "lambdas"))
from glue_job_keeper import active_run, ensure_running  # noqa: E402

JOB = "lakehouse-dynamodb-cdc-to-raw"


@pytest.fixture
def glue(mocked_aws):
    client = boto3.client("glue", region_name="eu-west-1")
    client.create_job(
        Name=JOB,
        Role="arn:aws:iam::123456789012:role/glue",
        Command={"Name": "gluestreaming", "ScriptLocation": "s3://code/glue_job.py"},
        ExecutionProperty={"MaxConcurrentRuns": 1},
    )
    yield client


def test_a_job_without_runs_is_started(glue):
    outcome = ensure_running(glue, JOB)
    assert outcome["active"] is None and outcome["started"]
    runs = glue.get_job_runs(JobName=JOB)["JobRuns"]
    assert [run["Id"] for run in runs] == [outcome["started"]]


def test_only_finished_runs_let_the_keeper_start_another():
    assert active_run([{"Id": "a", "JobRunState": "FAILED"}, {"Id": "b", "JobRunState": "SUCCEEDED"}]) is None
    assert active_run([{"Id": "a", "JobRunState": "STOPPED"}, {"Id": "b", "JobRunState": "TIMEOUT"}]) is None
    for state in ("STARTING", "RUNNING", "STOPPING", "WAITING"):
        assert active_run([{"Id": "old", "JobRunState": "FAILED"}, {"Id": "live", "JobRunState": state}]) == "live"


class ActiveRunGlue:
    """Glue as it answers while a run is live (moto ends runs at once, so it cannot)."""

    def get_job_runs(self, JobName, MaxResults):
        return {"JobRuns": [{"Id": "jr_live", "JobRunState": "RUNNING"}, {"Id": "jr_old", "JobRunState": "FAILED"}]}

    def start_job_run(self, JobName):
        raise AssertionError("must not start a second run")


def test_a_running_job_is_left_alone():
    assert ensure_running(ActiveRunGlue(), JOB) == {"active": "jr_live", "started": None}


def test_losing_a_race_for_the_single_run_slot_is_not_an_error(glue):
    def refuse(**_):
        raise glue.exceptions.ConcurrentRunsExceededException(
            {"Error": {"Code": "ConcurrentRunsExceededException", "Message": "one run only"}}, "StartJobRun"
        )

    glue.start_job_run = refuse
    assert ensure_running(glue, JOB) == {"active": None, "started": None}
