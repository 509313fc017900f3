"""The data key and the buckets: the lake (raw, quarantine, checkpoints), dbt's curated
data, Athena's query results, Glue's artifacts, and the access logs of all four."""
from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3

from deploy.config import DeployConfig
from streaming.io.layout import CHECKPOINTS_FOLDER, QUARANTINE_FOLDER, RAW_FOLDER

# Key prefixes in the lake bucket; the job's parameters and its role derive from these.
# The data directory's folder names: the job writes <quarantine_root>/quarantine/ itself.
RAW_PREFIX = RAW_FOLDER
QUARANTINE_PREFIX = QUARANTINE_FOLDER
CHECKPOINT_PREFIX = CHECKPOINTS_FOLDER
# dbt's Athena query results and the analysts' are kept apart: dbt's results can show
# staging rows, which analysts must not read.
DBT_RESULTS_PREFIX = "dbt"
ANALYST_RESULTS_PREFIX = "analysts"
CURATED_PREFIX = "dbt"


@dataclass(frozen=True)
class Storage:
    data_key: kms.Key
    lake_bucket: s3.Bucket
    curated_bucket: s3.Bucket
    athena_results_bucket: s3.Bucket
    # Glue's temporary directory and Spark UI event logs; the job's code is a CDK asset.
    artifacts_bucket: s3.Bucket

    def log_group(self, stack: Stack, construct_id: str, retention: logs.RetentionDays) -> logs.LogGroup:
        """A log group encrypted with the data key."""
        return logs.LogGroup(
            stack, construct_id, retention=retention, encryption_key=self.data_key, removal_policy=RemovalPolicy.DESTROY
        )


def add_storage(stack: Stack, config: DeployConfig) -> Storage:
    data_key = kms.Key(
        stack,
        "DataKey",
        description=f"{config.prefix}: lake, curated data, Athena results, alarms",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
    )
    # CloudWatch Logs encrypts the stack's log groups with the key
    # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
    data_key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            # In a key policy "*" is the key itself.
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                    )
                }
            },
        )
    )
    # S3 server access logs cannot be delivered to a bucket whose default encryption
    # is SSE-KMS (https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html).
    access_logs_bucket = s3.Bucket(
        stack,
        "AccessLogsBucket",
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="expire-access-logs",
                expiration=Duration.days(365),
                noncurrent_version_expiration=Duration.days(1),
            )
        ],
        removal_policy=RemovalPolicy.RETAIN,
    )

    def data_bucket(construct_id: str, logs_prefix: str, lifecycle_rules: list[s3.LifecycleRule]) -> s3.Bucket:
        return s3.Bucket(
            stack,
            construct_id,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=data_key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Versioned with a bounded history: an object overwritten or deleted by a bad
            # batch or build can be restored for noncurrent_version_retention_days.
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-old-versions",
                    noncurrent_version_expiration=Duration.days(config.noncurrent_version_retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                ),
                *lifecycle_rules,
            ],
            server_access_logs_bucket=access_logs_bucket,
            server_access_logs_prefix=f"{logs_prefix}/",
            removal_policy=RemovalPolicy.RETAIN,
        )

    # Each bucket adds a statement to the access-log bucket's policy, in this order.
    lake_bucket = data_bucket(
        "LakeBucket",
        "lake",
        [
            s3.LifecycleRule(
                id="expire-quarantine",
                prefix=f"{QUARANTINE_PREFIX}/",
                expiration=Duration.days(config.quarantine_retention_days),
            )
        ],
    )
    curated_bucket = data_bucket("CuratedBucket", "curated", [])
    athena_results_bucket = data_bucket(
        "AthenaResultsBucket",
        "athena-results",
        [s3.LifecycleRule(id="expire-query-results", expiration=Duration.days(config.athena_results_retention_days))],
    )
    artifacts_bucket = data_bucket(
        "ArtifactsBucket",
        "artifacts",
        [s3.LifecycleRule(id="expire-glue-temp", prefix="glue-temp/", expiration=Duration.days(7))],
    )
    return Storage(data_key, lake_bucket, curated_bucket, athena_results_bucket, artifacts_bucket)
