"""Per-batch metrics of the streaming job, published to CloudWatch on AWS, nowhere locally.

The deploy app (deploy/stacks/lakehouse.py) alarms on these names and imports them from
here, so a metric renamed here is renamed in its alarm too.

A failed publish is logged and the batch goes on: the data is already written, and a
job whose metrics stop arriving trips the "no batches completed" alarm instead.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streaming.pipeline.batch import BatchReport

log = logging.getLogger(__name__)

METRICS_NAMESPACE = "DynamoDBLakehouse/Streaming"
JOB_DIMENSION = "JobName"
TABLE_DIMENSION = "RawTable"

BATCHES_COMPLETED = "BatchesCompleted"
RECORDS_IN = "RecordsIn"
RECORDS_QUARANTINED = "RecordsQuarantined"
# Changes landed in unrouted raw tables: items of a single-table design that match no
# entity of its contract (a new kind of item the contract should learn).
RECORDS_UNROUTED = "RecordsUnrouted"
DUPLICATES_DROPPED = "DuplicatesDropped"
ROWS_LANDED = "RowsLanded"
EVENT_LAG_SECONDS = "EventLagSeconds"
BATCH_SECONDS = "BatchSeconds"

# One PutMetricData request carries a batch: 7 metrics plus one per raw table, far
# below the 1,000 data points a request may hold
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html).


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class CloudWatchMetricsPublisher:
    """Publishes a batch's counts under METRICS_NAMESPACE, dimensioned by the Glue job name."""

    def __init__(
        self,
        job_name: str,
        namespace: str = METRICS_NAMESPACE,
        client: Any = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if not job_name:
            raise ValueError("CloudWatchMetricsPublisher needs the job name: it is the metrics' dimension")
        if client is None:
            import boto3

            client = boto3.client("cloudwatch")
        self.job_name = job_name
        self.namespace = namespace
        self.client = client
        self.clock = clock

    def metric_data(self, report: BatchReport) -> list[dict[str, Any]]:
        """The MetricData entries of one batch (PutMetricData's request shape)."""
        timestamp = self.clock()
        job = [{"Name": JOB_DIMENSION, "Value": self.job_name}]

        def datum(name: str, value: float, unit: str, dimensions: list[dict[str, str]] = job) -> dict[str, Any]:
            return {"MetricName": name, "Dimensions": dimensions, "Timestamp": timestamp, "Value": value, "Unit": unit}

        data = [
            datum(BATCHES_COMPLETED, 1, "Count"),
            datum(RECORDS_IN, report.records_in, "Count"),
            datum(RECORDS_QUARANTINED, report.quarantined, "Count"),
            datum(RECORDS_UNROUTED, report.unrouted, "Count"),
            datum(DUPLICATES_DROPPED, report.duplicates_dropped, "Count"),
            datum(BATCH_SECONDS, report.seconds, "Seconds"),
        ]
        # A batch with no decodable event has no event time, hence no lag to report.
        if report.lag_seconds is not None:
            data.append(datum(EVENT_LAG_SECONDS, report.lag_seconds, "Seconds"))
        for raw_table, rows in sorted(report.landed.items()):
            data.append(datum(ROWS_LANDED, rows, "Count", [*job, {"Name": TABLE_DIMENSION, "Value": raw_table}]))
        return data

    def publish(self, report: BatchReport) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_metric_data(Namespace=self.namespace, MetricData=self.metric_data(report))
        except (BotoCoreError, ClientError) as error:
            log.warning("batch %s: metrics not published to CloudWatch (%s)", report.batch_id, error)

