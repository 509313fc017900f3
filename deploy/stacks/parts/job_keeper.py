"""The job keeper (deploy/lambdas/glue_job_keeper.py): starts the streaming job when no
run of it is active, on a schedule (also its first start after a deploy) and as soon as
a run fails."""
from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from deploy.config import DeployConfig
from deploy.stacks.parts import REPO_ROOT
from deploy.stacks.parts.storage import Storage
from deploy.stacks.parts.streaming_job import StreamingJob

# Run states after which the streaming job must be started again. A run someone
# STOPPED is left alone here, alarmed (alarms.py), and restarted by the schedule unless
# its rules are disabled.
GLUE_RESTART_STATES = ["FAILED", "TIMEOUT", "ERROR"]
KEEPER_INTERVAL = Duration.minutes(5)


def add_job_keeper(stack: Stack, config: DeployConfig, storage: Storage, job: StreamingJob) -> None:
    log_group = storage.log_group(stack, "JobKeeperLogs", logs.RetentionDays.ONE_MONTH)
    role = iam.Role(stack, "JobKeeperRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["glue:GetJobRuns", "glue:StartJobRun"],
            resources=[stack.format_arn(service="glue", resource="job", resource_name=job.name)],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn])
    )
    keeper = lambda_.Function(
        stack,
        "JobKeeper",
        description=f"Starts {job.name} when no run of it is active",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="glue_job_keeper.handler",
        # Caches left by the tests would change the asset's hash, not the code.
        code=lambda_.Code.from_asset(str(REPO_ROOT / "deploy" / "lambdas"), exclude=["__pycache__"]),
        environment={"JOB_NAME": job.name},
        timeout=Duration.seconds(30),
        role=role,
        log_group=log_group,
    )
    keeper.node.add_dependency(job.job)
    target = targets.LambdaFunction(keeper, retry_attempts=2)
    events.Rule(
        stack,
        "JobKeeperSchedule",
        rule_name=f"{config.prefix}-job-keeper-schedule",
        description=f"Starts {job.name} if it is not running (also its first start after deploy)",
        schedule=events.Schedule.rate(KEEPER_INTERVAL),
        targets=[target],
    )
    events.Rule(
        stack,
        "JobRunEndedRule",
        rule_name=f"{config.prefix}-job-keeper-on-failure",
        description=f"Restarts {job.name} as soon as a run fails",
        event_pattern=job.state_change_pattern(GLUE_RESTART_STATES),
        targets=[target],
    )
