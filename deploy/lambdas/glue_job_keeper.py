"""Keeps the Glue streaming job running.

Glue does not restart a streaming job run that failed, and the job has no retries here
(a retry would race the restart below). EventBridge invokes this function every few
minutes and whenever a run of the job ends FAILED, TIMEOUT or ERROR; it starts a run
unless one is already active. The job allows one concurrent run, so two invocations
racing each other start at most one run: the loser gets ConcurrentRunsExceededException.

To stop the job on purpose, disable the keeper's two EventBridge rules first
(<prefix>-job-keeper-schedule and <prefix>-job-keeper-on-failure; docs/deploy-aws.md, "First deploy").
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import boto3

log = logging.getLogger()
log.setLevel(logging.INFO)

# Run states in which a run holds (or is about to hold) the job's one slot
# (JobRunState in https://docs.aws.amazon.com/glue/latest/webapi/API_JobRun.html).
ACTIVE_STATES = frozenset({"STARTING", "RUNNING", "STOPPING", "WAITING"})


def active_run(runs: Iterable[Mapping[str, Any]]) -> str | None:
    for run in runs:
        if run.get("JobRunState") in ACTIVE_STATES:
            return run["Id"]
    return None


def ensure_running(glue: Any, job_name: str) -> dict[str, str | None]:
    # GetJobRuns lists the newest runs first; an active run is always among them.
    runs = glue.get_job_runs(JobName=job_name, MaxResults=25)["JobRuns"]
    running = active_run(runs)
    if running:
        return {"active": running, "started": None}
    try:
        started = glue.start_job_run(JobName=job_name)["JobRunId"]
    except glue.exceptions.ConcurrentRunsExceededException:
        log.info("%s: another invocation started a run meanwhile", job_name)
        return {"active": None, "started": None}
    log.warning("%s had no active run: started %s", job_name, started)
    return {"active": None, "started": started}


def handler(event: Mapping[str, Any], context: Any) -> dict[str, str | None]:
    return ensure_running(boto3.client("glue"), os.environ["JOB_NAME"])
