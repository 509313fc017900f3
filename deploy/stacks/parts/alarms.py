"""The alarm topic and what publishes to it: CloudWatch alarms on the job's own metrics
(streaming/io/metrics.py) and on failed dbt builds, and every end of a job run."""
from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions

from deploy.config import DeployConfig
from deploy.stacks.parts.dbt_schedule import DbtSchedule
from deploy.stacks.parts.storage import Storage
from deploy.stacks.parts.streaming_job import StreamingJob
from streaming.io import metrics

# Every end of a run but success, including a run someone STOPPED (which the keeper
# restarts on its schedule, job_keeper.py).
GLUE_ALARM_STATES = ["FAILED", "TIMEOUT", "ERROR", "STOPPED"]


def add_alarms(stack: Stack, config: DeployConfig, storage: Storage, job: StreamingJob, dbt: DbtSchedule) -> None:
    topic = sns.Topic(stack, "AlarmTopic", display_name=f"{config.prefix} lakehouse alarms", master_key=storage.data_key)
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="DenyInsecureTransport",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        )
    )
    if config.alarm_email:
        topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
    # CloudWatch alarms and EventBridge publish to the encrypted topic with the key.
    for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):
        storage.data_key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                # In a key policy "*" is the key itself.
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
    action = cloudwatch_actions.SnsAction(topic)

    def alarm(
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        missing: cloudwatch.TreatMissingData,
        evaluation_periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> None:
        added = cloudwatch.Alarm(
            stack,
            construct_id,
            alarm_name=f"{config.prefix}-{construct_id.removesuffix('Alarm')}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )
        added.add_alarm_action(action)
        added.add_ok_action(action)

    def job_metric(name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=metrics.METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={metrics.JOB_DIMENSION: job.name},
            statistic=statistic,
            period=period,
        )

    # The job's own lag, published after every micro-batch by streaming/io/metrics.py:
    # how far the newest event of the batch lies behind the time the batch ran. Glue's
    # streaming metrics (glue.driver.streaming.maxConsumerLagInMs) come from
    # glueContext.forEachBatch, and the job runs Spark's foreachBatch
    # (streaming/runtime/stream_loop.py), so that metric may never exist
    # (https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-concepts.html).
    alarm(
        "ConsumerLagAlarm",
        job_metric(metrics.EVENT_LAG_SECONDS, "Maximum", Duration.minutes(5)),
        threshold=config.consumer_lag_alarm_seconds,
        evaluation_periods=3,
        description=f"{job.name} writes events more than {config.consumer_lag_alarm_seconds} s after they happened",
        # A batch without a decodable event publishes no lag, so silence here is also
        # a quiet stream; a stopped job is JobNotRunning's alarm, which breaches on silence.
        missing=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    alarm(
        "JobNotRunningAlarm",
        job_metric(metrics.BATCHES_COMPLETED, "Sum", Duration.minutes(config.no_batch_alarm_minutes)),
        threshold=1,
        comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        description=f"{job.name} completed no micro-batch in {config.no_batch_alarm_minutes} minutes",
        # No data at all is the clearest sign of a job that is not running.
        missing=cloudwatch.TreatMissingData.BREACHING,
    )
    alarm(
        "QuarantineGrowthAlarm",
        job_metric(metrics.RECORDS_QUARANTINED, "Sum", Duration.hours(1)),
        threshold=config.quarantined_records_alarm_per_hour,
        description=f"more than {config.quarantined_records_alarm_per_hour} records quarantined in an hour",
        missing=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    # Items of a single-table design that match no entity land in its unrouted table:
    # nothing is lost, but analysts see none of them until the contract learns their
    # entity and `lakehouse unrouted replay` routes them (docs/operations.md).
    alarm(
        "UnroutedItemsAlarm",
        job_metric(metrics.RECORDS_UNROUTED, "Sum", Duration.hours(1)),
        threshold=config.unrouted_records_alarm_per_hour,
        description=f"more than {config.unrouted_records_alarm_per_hour} changes in an hour matched no entity "
        "of their table's contract (they land in <table>_unrouted)",
        missing=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    for construct_id, project, what in (
        ("DbtBuildFailedAlarm", dbt.build, "dbt build"),
        ("SourceFreshnessFailedAlarm", dbt.freshness, "dbt source freshness"),
    ):
        alarm(
            construct_id,
            project.metric_failed_builds(period=Duration.hours(1), statistic="Sum"),
            threshold=0,
            description=f"{what} failed (CodeBuild project {project.project_name})",
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
    events.Rule(
        stack,
        "JobStateAlarmRule",
        description=f"Tells the alarm topic when a run of {job.name} ends",
        event_pattern=job.state_change_pattern(GLUE_ALARM_STATES),
        targets=[targets.SnsTopic(topic)],
    )
