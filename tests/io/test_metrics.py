"""The per-batch CloudWatch metrics, against moto's CloudWatch (no AWS account needed)."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from streaming.io.metrics import (
    BATCHES_COMPLETED,
    EVENT_LAG_SECONDS,
    METRICS_NAMESPACE,
    RECORDS_IN,
    RECORDS_QUARANTINED,
    RECORDS_UNROUTED,
    ROWS_LANDED,
    CloudWatchMetricsPublisher,
)
from streaming.pipeline.batch import BatchReport

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def report(**changes) -> BatchReport:
    values = dict(
        batch_id=7,
        records_in=120,
        landed={"customers": 40, "orders": 70},
        quarantined=3,
        unrouted=0,
        moved=0,
        duplicates_dropped=7,
        max_event_ts=NOW - timedelta(seconds=42),
        lag_seconds=42.0,
        seconds=3.5,
    )
    values.update(changes)
    return BatchReport(**values)


@pytest.fixture
def cloudwatch(mocked_aws):
    yield boto3.client("cloudwatch", region_name="eu-west-1")


def statistic(client, name: str, dimensions: list[dict[str, str]], stat: str = "Sum") -> float:
    answer = client.get_metric_statistics(
        Namespace=METRICS_NAMESPACE,
        MetricName=name,
        Dimensions=dimensions,
        StartTime=NOW - timedelta(hours=1),
        EndTime=NOW + timedelta(hours=1),
        Period=3600,
        Statistics=[stat],
    )
    (point,) = answer["Datapoints"]
    return point[stat]


def test_published_batches_add_up_per_job_and_per_table(cloudwatch):
    publisher = CloudWatchMetricsPublisher("cdc-to-raw", client=cloudwatch, clock=lambda: NOW)
    publisher.publish(report())
    publisher.publish(report(batch_id=8, records_in=10, landed={"customers": 5, "orders": 0, "app_unrouted": 4},
                             quarantined=5, unrouted=4))

    job = [{"Name": "JobName", "Value": "cdc-to-raw"}]
    assert statistic(cloudwatch, BATCHES_COMPLETED, job) == 2
    assert statistic(cloudwatch, RECORDS_IN, job) == 130
    assert statistic(cloudwatch, RECORDS_QUARANTINED, job) == 8
    assert statistic(cloudwatch, RECORDS_UNROUTED, job) == 4, "the alarm on unrouted items reads this sum"
    customers = [*job, {"Name": "RawTable", "Value": "customers"}]
    assert statistic(cloudwatch, ROWS_LANDED, customers) == 45
    assert statistic(cloudwatch, EVENT_LAG_SECONDS, job, "Maximum") == 42.0
    # Another job's metrics are apart: the alarms of one deployment never see another's.
    assert not cloudwatch.get_metric_statistics(
        Namespace=METRICS_NAMESPACE,
        MetricName=RECORDS_IN,
        Dimensions=[{"Name": "JobName", "Value": "another-job"}],
        StartTime=NOW - timedelta(hours=1),
        EndTime=NOW + timedelta(hours=1),
        Period=3600,
        Statistics=["Sum"],
    )["Datapoints"]


def test_a_batch_without_event_time_reports_no_lag(cloudwatch):
    publisher = CloudWatchMetricsPublisher("cdc-to-raw", client=cloudwatch, clock=lambda: NOW)
    data = publisher.metric_data(report(max_event_ts=None, lag_seconds=None, landed={}))
    names = {datum["MetricName"] for datum in data}
    assert EVENT_LAG_SECONDS not in names
    assert ROWS_LANDED not in names
    assert {BATCHES_COMPLETED, RECORDS_IN, RECORDS_QUARANTINED, RECORDS_UNROUTED} <= names


def test_a_cloudwatch_error_is_logged_and_does_not_fail_the_batch(caplog):
    client = boto3.client("cloudwatch", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        stubber.add_client_error("put_metric_data", service_error_code="Throttling", http_status_code=400)
        with caplog.at_level(logging.WARNING, logger="streaming.io.metrics"):
            CloudWatchMetricsPublisher("cdc-to-raw", client=client).publish(report())
        stubber.assert_no_pending_responses()
    assert "batch 7: metrics not published to CloudWatch" in caplog.text
    assert "Throttling" in caplog.text


def test_the_job_name_is_required():
    with pytest.raises(ValueError, match="job name"):
        CloudWatchMetricsPublisher("", client=object())
