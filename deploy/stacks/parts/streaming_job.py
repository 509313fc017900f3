"""The Glue streaming job (streaming/runtime/glue_job.py): its code as CDK assets, its
arguments (deploy/job_arguments.py) and its role."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import ArnFormat, CfnOutput, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3_assets as s3_assets

from deploy.config import DeployConfig
from deploy.job_arguments import glue_system_arguments, job_parameters
from deploy.stacks.iam_actions import (
    GLUE_CATALOG_READ,
    GLUE_CATALOG_WRITE,
    KMS_USE,
    S3_OBJECT_READ,
    S3_OBJECT_WRITE,
    glue_catalog_arn,
    glue_database_arn,
    glue_database_resources,
)
from deploy.stacks.parts import REPO_ROOT
from deploy.stacks.parts.storage import CHECKPOINT_PREFIX, QUARANTINE_PREFIX, RAW_PREFIX, Storage
from streaming.contracts.loader import ContractSet
from streaming.io import metrics
from streaming.runtime.package_zip import build_package_zip

GLUE_VERSION = "5.1"


@dataclass(frozen=True)
class StreamingJob:
    name: str
    job: glue.CfnJob
    role: iam.Role

    def state_change_pattern(self, states: list[str]) -> events.EventPattern:
        """Glue's "Glue Job State Change" event of this job's runs ending in `states`
        (https://docs.aws.amazon.com/glue/latest/dg/automating-awsglue-with-cloudwatch-events.html)."""
        return events.EventPattern(
            source=["aws.glue"],
            detail_type=["Glue Job State Change"],
            detail={"jobName": [self.name], "state": states},
        )


def add_streaming_job(
    stack: Stack,
    config: DeployConfig,
    storage: Storage,
    raw_database: glue.CfnDatabase,
    stream: kinesis.Stream,
    contracts: ContractSet,
    build_dir: Path,
) -> StreamingJob:
    package_zip = build_package_zip(build_dir / "streaming.zip", contracts=contracts)
    package_asset = s3_assets.Asset(stack, "StreamingPackage", path=str(package_zip))
    script_asset = s3_assets.Asset(stack, "GlueJobScript", path=str(REPO_ROOT / "streaming" / "runtime" / "glue_job.py"))
    lake = f"s3://{storage.lake_bucket.bucket_name}"
    arguments = {
        **job_parameters(
            required={
                "stream_arn": stream.stream_arn,
                "raw_base_path": f"{lake}/{RAW_PREFIX}",
                "database": config.raw_database,
                # The job writes <quarantine_root>/quarantine/.
                "quarantine_root": lake,
                "checkpoint_location": f"{lake}/{CHECKPOINT_PREFIX}/{config.job_name}/",
            },
            optional=config.job_arguments,
        ),
        **glue_system_arguments(
            extra_py_files=package_asset.s3_object_url,
            temp_dir=storage.artifacts_bucket.s3_url_for_object("glue-temp/"),
            spark_event_logs=storage.artifacts_bucket.s3_url_for_object("spark-ui/"),
        ),
    }
    role = iam.Role(
        stack,
        "GlueJobRole",
        assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        description="The streaming job: reads the stream, writes raw, quarantine and checkpoint prefixes",
    )
    _grant_job_role(stack, config, role, storage, stream, [package_asset, script_asset])
    job = glue.CfnJob(
        stack,
        "StreamingJob",
        name=config.job_name,
        description="DynamoDB CDC from Kinesis into the raw Hudi tables (streaming/runtime/glue_job.py)",
        role=role.role_arn,
        glue_version=GLUE_VERSION,
        command=glue.CfnJob.JobCommandProperty(
            name="gluestreaming", script_location=script_asset.s3_object_url, python_version="3"
        ),
        default_arguments=arguments,
        worker_type=config.glue_worker_type,
        number_of_workers=config.glue_number_of_workers,
        # One writer per checkpoint and data directory (docs/architecture.md): a second
        # concurrent run is refused by Glue itself.
        execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
        # Restarts are the keeper's (deploy/lambdas/glue_job_keeper.py), not Glue retries.
        max_retries=0,
        # Glue restarts streaming runs for maintenance; Sunday 03:00 UTC is the quietest slot
        # (https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-maintenance.html).
        maintenance_window="Sun:03",
    )
    job.node.add_dependency(raw_database)
    CfnOutput(stack, "StreamingJobName", value=config.job_name)
    CfnOutput(stack, "ChangeStreamArn", value=stream.stream_arn)
    CfnOutput(stack, "LakeBucketName", value=storage.lake_bucket.bucket_name)
    return StreamingJob(config.job_name, job, role)


def _grant_job_role(
    stack: Stack,
    config: DeployConfig,
    role: iam.Role,
    storage: Storage,
    stream: kinesis.Stream,
    code_assets: list[s3_assets.Asset],
) -> None:
    lake, artifacts = storage.lake_bucket, storage.artifacts_bucket
    writable = [RAW_PREFIX, QUARANTINE_PREFIX, CHECKPOINT_PREFIX]
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[
                "kinesis:DescribeStream",
                "kinesis:DescribeStreamSummary",
                "kinesis:GetRecords",
                "kinesis:GetShardIterator",
                "kinesis:ListShards",
                "kinesis:SubscribeToShard",
            ],
            resources=[stream.stream_arn],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
            resources=[lake.arn_for_objects(f"{prefix}/*") for prefix in writable],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[lake.bucket_arn],
            # "" lists only the bucket's top-level names: Hadoop's S3 filesystem checks
            # the parents of <quarantine_root>/quarantine/, whose root is the bucket.
            conditions={"StringLike": {"s3:prefix": ["", *writable, *(f"{prefix}/*" for prefix in writable)]}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
            resources=[artifacts.arn_for_objects(f"{prefix}/*") for prefix in ("glue-temp", "spark-ui")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[artifacts.bucket_arn],
            conditions={"StringLike": {"s3:prefix": ["glue-temp/*", "spark-ui/*"]}},
        )
    )
    # Only the job's two code objects in the CDK asset bucket, not the bucket.
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject"],
            resources=[f"arn:{stack.partition}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}" for asset in code_assets],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*GLUE_CATALOG_READ, *GLUE_CATALOG_WRITE],
            resources=glue_database_resources(stack, [config.raw_database]),
        )
    )
    # Spark's catalog looks up the "default" database when it starts and creates it
    # when the account's catalog has none (apache/spark, sql/core/src/main/scala/org/
    # apache/spark/sql/internal/SharedState.scala, externalCatalog): through Glue's Hive
    # client, on the job's first catalog sync. Creating it in the stack would fail in
    # the accounts that have one already, so the job may create that one database.
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["glue:GetDatabase", "glue:CreateDatabase"],
            resources=[glue_catalog_arn(stack), glue_database_arn(stack, "default")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[
                stack.format_arn(
                    service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                )
            ],
        )
    )
    # PutMetricData has no resource type in IAM, so "*" is the only resource it takes;
    # the condition keeps the job to Glue's namespace and the lakehouse's own.
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": ["Glue", metrics.METRICS_NAMESPACE]}},
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[storage.data_key.key_arn]))
