"""The lakehouse on AWS in one stack: stream, raw and curated storage, the Glue streaming
job, scheduled dbt, least-privilege roles and alarms.

One stack because every part refers to the others (the job's role names the buckets,
the alarms name the job and the dbt projects); splitting it would only add exports.
"""
from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import custom_resources as cr
from constructs import Construct

from deploy.config import DeployConfig
from deploy.job_arguments import glue_system_arguments, job_parameters
from deploy.stacks.iam_actions import (
    ATHENA_QUERY,
    GLUE_CATALOG_READ,
    GLUE_CATALOG_WRITE,
    KMS_USE,
    S3_OBJECT_READ,
    S3_OBJECT_WRITE,
    glue_catalog_arn,
    glue_database_arn,
    glue_database_resources,
)
from streaming.io import metrics
from streaming.io.layout import CHECKPOINTS_FOLDER, QUARANTINE_FOLDER, RAW_FOLDER
from streaming.runtime.package_zip import build_package_zip

REPO_ROOT = Path(__file__).resolve().parents[2]

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
DBT_IMAGE_WORKDIR = "/opt/lakehouse"
ATHENA_ENGINE = "Athena engine version 3"
GLUE_VERSION = "5.1"

# Lake Formation permissions of a role that reads a database, and of one that writes it
# (https://docs.aws.amazon.com/lake-formation/latest/dg/lf-permissions-reference.html).
LF_READ = {"database": ["DESCRIBE"], "tables": ["SELECT", "DESCRIBE"]}
LF_WRITE = {
    "database": ["DESCRIBE", "CREATE_TABLE", "ALTER"],
    "tables": ["SELECT", "INSERT", "DELETE", "DESCRIBE", "ALTER", "DROP"],
}

# Run states after which the streaming job must be started again. STOPPED is a run
# someone stopped: alarmed, and restarted by the keeper's schedule unless its rules are disabled.
GLUE_RESTART_STATES = ["FAILED", "TIMEOUT", "ERROR"]
GLUE_ALARM_STATES = ["FAILED", "TIMEOUT", "ERROR", "STOPPED"]
KEEPER_INTERVAL = Duration.minutes(5)


class LakehouseStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, build_dir: Path, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.data_key = kms.Key(
            self,
            "DataKey",
            description=f"{config.prefix}: lake, curated data, Athena results, alarms",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # CloudWatch Logs encrypts the stack's log groups with the key
        # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
        self.data_key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                # In a key policy "*" is the key itself.
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": self.format_arn(
                            service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                        )
                    }
                },
            )
        )
        self._storage()
        self._catalog()
        self._stream()
        self._streaming_job(build_dir)
        self._job_keeper()
        self._dbt_schedule()
        self._analyst_access()
        if config.lake_formation_grants:
            self._lake_formation_grants()
        self._alarms()

    # --- storage -----------------------------------------------------------------------

    def _log_group(self, construct_id: str, retention: logs.RetentionDays) -> logs.LogGroup:
        return logs.LogGroup(
            self, construct_id, retention=retention, encryption_key=self.data_key, removal_policy=RemovalPolicy.DESTROY
        )

    def _bucket(self, construct_id: str, logs_prefix: str, lifecycle_rules: list[s3.LifecycleRule]) -> s3.Bucket:
        return s3.Bucket(
            self,
            construct_id,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.data_key,
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
                    noncurrent_version_expiration=Duration.days(self.config.noncurrent_version_retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                ),
                *lifecycle_rules,
            ],
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix=f"{logs_prefix}/",
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _storage(self) -> None:
        config = self.config
        # S3 server access logs cannot be delivered to a bucket whose default encryption
        # is SSE-KMS (https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html).
        self.access_logs_bucket = s3.Bucket(
            self,
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
        self.lake_bucket = self._bucket(
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
        self.curated_bucket = self._bucket("CuratedBucket", "curated", [])
        self.athena_results_bucket = self._bucket(
            "AthenaResultsBucket",
            "athena-results",
            [s3.LifecycleRule(id="expire-query-results", expiration=Duration.days(config.athena_results_retention_days))],
        )
        # Glue's temporary directory and Spark UI event logs; the job's code is a CDK asset.
        self.artifacts_bucket = self._bucket(
            "ArtifactsBucket",
            "artifacts",
            [s3.LifecycleRule(id="expire-glue-temp", prefix="glue-temp/", expiration=Duration.days(7))],
        )

    # --- catalog and Athena --------------------------------------------------------------

    def _catalog(self) -> None:
        config = self.config
        self.raw_database = self._database(
            "RawDatabase", config.raw_database,
            "Raw DynamoDB change logs and current state (Hudi), written by the streaming job",
        )
        self.curated_databases = {
            layer: self._database(f"Curated{layer.capitalize()}Database", name,
                                  f"dbt {layer} models of {config.athena_schema} (Iceberg)")
            for layer, name in config.curated_schemas.items()
        }
        # dbt-athena starts every query with the target schema as its context database
        # (dbt-labs/dbt-athena, dbt-athena/src/dbt/adapters/athena/connections.py,
        # _start_execution), and the on-run-start hook keeps a view there
        # (macros/tests/changed_rows_only.sql): it must exist before the first build.
        self.dbt_target_database = self._database(
            "DbtTargetDatabase", config.athena_schema,
            f"dbt's target schema {config.athena_schema}: the context of its queries, its run-time views",
        )
        self.dbt_workgroup = self._workgroup("DbtWorkGroup", f"{config.prefix}-dbt", DBT_RESULTS_PREFIX)
        self.analyst_workgroup = self._workgroup("AnalystWorkGroup", f"{config.prefix}-analysts", ANALYST_RESULTS_PREFIX)

    def _database(self, construct_id: str, name: str, description: str) -> glue.CfnDatabase:
        return glue.CfnDatabase(
            self,
            construct_id,
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(name=name, description=description),
        )

    def _workgroup(self, construct_id: str, name: str, results_prefix: str) -> athena.CfnWorkGroup:
        return athena.CfnWorkGroup(
            self,
            construct_id,
            name=name,
            state="ENABLED",
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                # Clients cannot override the result location or its encryption.
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=self.config.athena_bytes_scanned_cutoff,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version=ATHENA_ENGINE),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=self.athena_results_bucket.s3_url_for_object(f"{results_prefix}/"),
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=self.data_key.key_arn
                    ),
                ),
            ),
        )

    # --- stream and DynamoDB destinations -----------------------------------------------

    def _stream(self) -> None:
        config = self.config
        self.stream = kinesis.Stream(
            self,
            "ChangeStream",
            stream_name=f"{config.prefix}-dynamodb-cdc",
            stream_mode=kinesis.StreamMode.ON_DEMAND if config.stream_on_demand else kinesis.StreamMode.PROVISIONED,
            shard_count=None if config.stream_on_demand else config.stream_shard_count,
            # The AWS managed key (aws/kinesis) needs no key policy for DynamoDB's writes;
            # a customer managed key would need grants for DynamoDB's replication, which
            # cannot be verified offline.
            encryption=kinesis.StreamEncryption.MANAGED,
            retention_period=Duration.hours(config.stream_retention_hours),
        )
        # The custom resources below share one provider function: its role and log group
        # are made here, so it gets only its log group, not the managed
        # AWSLambdaBasicExecutionRole (logs on every resource).
        self.destination_log_group = self._log_group("KinesisDestinationLogs", logs.RetentionDays.ONE_MONTH)
        self.destination_role = iam.Role(
            self,
            "KinesisDestinationRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Turns the DynamoDB tables' Kinesis streaming destination on and off",
        )
        self.destination_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.destination_log_group.log_group_arn],
            )
        )
        for table in config.dynamodb_tables:
            self._kinesis_destination(table)

    def _kinesis_destination(self, table: str) -> None:
        """Streams an existing table's changes into the stream at microsecond precision.

        AWS::DynamoDB::Table's KinesisStreamSpecification covers tables CloudFormation
        creates; these tables exist already, so a custom resource calls the API
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_EnableKinesisStreamingDestination.html).
        """
        table_arn = self.format_arn(service="dynamodb", resource="table", resource_name=table)
        destination = {"TableName": table, "StreamArn": self.stream.stream_arn}
        precision = {"ApproximateCreationDateTimePrecision": "MICROSECOND"}
        # The stream's name comes from the prefix, which also names the stack, so within
        # a stack the stream ARN (and this physical id) never changes.
        physical_id = cr.PhysicalResourceId.of(f"{table}|{self.stream.stream_arn}")
        # Permissions the DynamoDB developer guide lists for enabling and disabling
        # (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/kds_iam.html).
        cr.AwsCustomResource(
            self,
            f"KinesisDestination-{table}",
            on_create=cr.AwsSdkCall(
                service="DynamoDB",
                action="enableKinesisStreamingDestination",
                parameters={**destination, "EnableKinesisStreamingConfiguration": precision},
                physical_resource_id=physical_id,
            ),
            # An update runs on a destination that is already enabled, where Enable would
            # fail; Update sets the configuration of the existing one
            # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateKinesisStreamingDestination.html).
            on_update=cr.AwsSdkCall(
                service="DynamoDB",
                action="updateKinesisStreamingDestination",
                parameters={**destination, "UpdateKinesisStreamingConfiguration": precision},
                physical_resource_id=physical_id,
            ),
            on_delete=cr.AwsSdkCall(service="DynamoDB", action="disableKinesisStreamingDestination", parameters=destination),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=[
                            "dynamodb:EnableKinesisStreamingDestination",
                            "dynamodb:UpdateKinesisStreamingDestination",
                            "dynamodb:DisableKinesisStreamingDestination",
                            "dynamodb:DescribeKinesisStreamingDestination",
                        ],
                        resources=[table_arn],
                    ),
                    iam.PolicyStatement(
                        actions=["kinesis:PutRecords", "kinesis:DescribeStream", "kinesis:DescribeStreamSummary"],
                        resources=[self.stream.stream_arn],
                    ),
                    # ListStreams has no resource type in IAM: "*" is the only resource it takes
                    # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesis.html).
                    iam.PolicyStatement(actions=["kinesis:ListStreams"], resources=["*"]),
                    # The first destination creates DynamoDB's service-linked replication role.
                    iam.PolicyStatement(
                        actions=["iam:CreateServiceLinkedRole"],
                        resources=[
                            self.format_arn(
                                service="iam",
                                region="",
                                resource="role",
                                resource_name="aws-service-role/kinesisreplication.dynamodb.amazonaws.com/*",
                            )
                        ],
                        conditions={"StringEquals": {"iam:AWSServiceName": "kinesisreplication.dynamodb.amazonaws.com"}},
                    ),
                ]
            ),
            install_latest_aws_sdk=False,
            role=self.destination_role,
            log_group=self.destination_log_group,
            timeout=Duration.minutes(2),
        )

    # --- the Glue streaming job ---------------------------------------------------------

    def _streaming_job(self, build_dir: Path) -> None:
        config = self.config
        package_zip = build_package_zip(build_dir / "streaming.zip")
        self.package_asset = s3_assets.Asset(self, "StreamingPackage", path=str(package_zip))
        self.script_asset = s3_assets.Asset(self, "GlueJobScript", path=str(REPO_ROOT / "streaming" / "runtime" / "glue_job.py"))
        lake = f"s3://{self.lake_bucket.bucket_name}"
        arguments = {
            **job_parameters(
                required={
                    "stream_arn": self.stream.stream_arn,
                    "raw_base_path": f"{lake}/{RAW_PREFIX}",
                    "database": config.raw_database,
                    # The job writes <quarantine_root>/quarantine/.
                    "quarantine_root": lake,
                    "checkpoint_location": f"{lake}/{CHECKPOINT_PREFIX}/{config.job_name}/",
                },
                optional=config.job_arguments,
            ),
            **glue_system_arguments(
                extra_py_files=self.package_asset.s3_object_url,
                temp_dir=self.artifacts_bucket.s3_url_for_object("glue-temp/"),
                spark_event_logs=self.artifacts_bucket.s3_url_for_object("spark-ui/"),
            ),
        }
        self.job_role = iam.Role(
            self,
            "GlueJobRole",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description="The streaming job: reads the stream, writes raw, quarantine and checkpoint prefixes",
        )
        self._grant_job_role()
        self.job = glue.CfnJob(
            self,
            "StreamingJob",
            name=config.job_name,
            description="DynamoDB CDC from Kinesis into the raw Hudi tables (streaming/runtime/glue_job.py)",
            role=self.job_role.role_arn,
            glue_version=GLUE_VERSION,
            command=glue.CfnJob.JobCommandProperty(
                name="gluestreaming", script_location=self.script_asset.s3_object_url, python_version="3"
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
        self.job.node.add_dependency(self.raw_database)
        CfnOutput(self, "StreamingJobName", value=config.job_name)
        CfnOutput(self, "ChangeStreamArn", value=self.stream.stream_arn)
        CfnOutput(self, "LakeBucketName", value=self.lake_bucket.bucket_name)

    def _grant_job_role(self) -> None:
        role, lake = self.job_role, self.lake_bucket
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
                resources=[self.stream.stream_arn],
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
                resources=[self.artifacts_bucket.arn_for_objects(f"{prefix}/*") for prefix in ("glue-temp", "spark-ui")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.artifacts_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": ["glue-temp/*", "spark-ui/*"]}},
            )
        )
        # Only the job's two code objects in the CDK asset bucket, not the bucket.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    f"arn:{self.partition}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}"
                    for asset in (self.package_asset, self.script_asset)
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[*GLUE_CATALOG_READ, *GLUE_CATALOG_WRITE],
                resources=glue_database_resources(self, [self.config.raw_database]),
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
                resources=[glue_catalog_arn(self), glue_database_arn(self, "default")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.format_arn(service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME)],
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
        role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[self.data_key.key_arn]))

    # --- keeping the job running ----------------------------------------------------------

    def _job_keeper(self) -> None:
        log_group = self._log_group("JobKeeperLogs", logs.RetentionDays.ONE_MONTH)
        role = iam.Role(self, "JobKeeperRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["glue:GetJobRuns", "glue:StartJobRun"],
                resources=[self.format_arn(service="glue", resource="job", resource_name=self.config.job_name)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn])
        )
        self.keeper = lambda_.Function(
            self,
            "JobKeeper",
            description=f"Starts {self.config.job_name} when no run of it is active",
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler="glue_job_keeper.handler",
            # Caches left by the tests would change the asset's hash, not the code.
            code=lambda_.Code.from_asset(str(REPO_ROOT / "deploy" / "lambdas"), exclude=["__pycache__"]),
            environment={"JOB_NAME": self.config.job_name},
            timeout=Duration.seconds(30),
            role=role,
            log_group=log_group,
        )
        self.keeper.node.add_dependency(self.job)
        target = targets.LambdaFunction(self.keeper, retry_attempts=2)
        self.keeper_schedule = events.Rule(
            self,
            "JobKeeperSchedule",
            rule_name=f"{self.config.prefix}-job-keeper-schedule",
            description=f"Starts {self.config.job_name} if it is not running (also its first start after deploy)",
            schedule=events.Schedule.rate(KEEPER_INTERVAL),
            targets=[target],
        )
        self.job_failed_rule = events.Rule(
            self,
            "JobRunEndedRule",
            rule_name=f"{self.config.prefix}-job-keeper-on-failure",
            description=f"Restarts {self.config.job_name} as soon as a run fails",
            event_pattern=self._job_state_pattern(GLUE_RESTART_STATES),
            targets=[target],
        )

    def _job_state_pattern(self, states: list[str]) -> events.EventPattern:
        # Glue's "Glue Job State Change" event
        # (https://docs.aws.amazon.com/glue/latest/dg/automating-awsglue-with-cloudwatch-events.html).
        return events.EventPattern(
            source=["aws.glue"],
            detail_type=["Glue Job State Change"],
            detail={"jobName": [self.config.job_name], "state": states},
        )

    # --- scheduled dbt ------------------------------------------------------------------

    def _dbt_schedule(self) -> None:
        config = self.config
        if config.pii_secret_arn:
            self.pii_secret = secretsmanager.Secret.from_secret_complete_arn(self, "PiiKey", config.pii_secret_arn)
        else:
            self.pii_secret = secretsmanager.Secret(
                self,
                "PiiKey",
                description=f"{config.prefix}: key of the marts' PII pseudonyms (LAKEHOUSE_PII_KEY)",
                encryption_key=self.data_key,
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=64, exclude_punctuation=True
                ),
                removal_policy=RemovalPolicy.RETAIN,
            )
        self.dbt_role = iam.Role(
            self,
            "DbtRole",
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description="Scheduled dbt: reads raw, writes the curated schemas",
        )
        self._grant_dbt_role()
        # CodeBuild's LINUX_CONTAINER environments run x86_64, whatever machine deploys
        # (https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-compute-types.html):
        # an image built natively on an arm64 laptop would not start there.
        image = codebuild.LinuxBuildImage.from_asset(
            self, "DbtImage", directory=str(REPO_ROOT), platform=ecr_assets.Platform.LINUX_AMD64
        )
        environment = {
            "LAKEHOUSE_DBT_TARGET": "athena",
            "AWS_REGION": self.region,
            "LAKEHOUSE_RAW_DATABASE": config.raw_database,
            "LAKEHOUSE_ATHENA_SCHEMA": config.athena_schema,
            "LAKEHOUSE_ATHENA_S3_STAGING_DIR": self.athena_results_bucket.s3_url_for_object(f"{DBT_RESULTS_PREFIX}/"),
            "LAKEHOUSE_ATHENA_S3_DATA_DIR": self.curated_bucket.s3_url_for_object(f"{CURATED_PREFIX}/"),
            "LAKEHOUSE_ATHENA_WORK_GROUP": self.dbt_workgroup.name,
        }
        variables = {
            name: codebuild.BuildEnvironmentVariable(value=value) for name, value in environment.items()
        }
        variables["LAKEHOUSE_PII_KEY"] = codebuild.BuildEnvironmentVariable(
            type=codebuild.BuildEnvironmentVariableType.SECRETS_MANAGER, value=self.pii_secret.secret_arn
        )
        self.dbt_build = self._dbt_project(
            "DbtBuild",
            "build",
            # The models read the PII key from a table the key publisher writes first;
            # unit tests check SQL logic and run in CI (docs/dbt.md, "Tests").
            "python -m lakehouse_dbt.athena_pii_key && dbt build --exclude-resource-type unit_test",
            image,
            variables,
        )
        self.dbt_freshness = self._dbt_project("DbtSourceFreshness", "source-freshness", "dbt source freshness", image, variables)
        for construct_id, project, schedule in (
            ("DbtBuildSchedule", self.dbt_build, config.dbt_build_schedule),
            ("DbtFreshnessSchedule", self.dbt_freshness, config.dbt_freshness_schedule),
        ):
            events.Rule(
                self,
                construct_id,
                description=f"Runs {project.project_name}",
                schedule=events.Schedule.expression(schedule),
                targets=[targets.CodeBuildProject(project)],
            )

    def _dbt_project(
        self,
        construct_id: str,
        suffix: str,
        command: str,
        image: codebuild.IBuildImage,
        variables: dict[str, codebuild.BuildEnvironmentVariable],
    ) -> codebuild.Project:
        log_group = self._log_group(f"{construct_id}Logs", logs.RetentionDays.THREE_MONTHS)
        return codebuild.Project(
            self,
            construct_id,
            project_name=f"{self.config.prefix}-dbt-{suffix}",
            description=f"{command} against the athena target",
            role=self.dbt_role,
            encryption_key=self.data_key,
            environment=codebuild.BuildEnvironment(build_image=image, compute_type=codebuild.ComputeType.SMALL),
            environment_variables=variables,
            build_spec=codebuild.BuildSpec.from_object(
                {
                    "version": "0.2",
                    "phases": {"build": {"commands": [f"cd {DBT_IMAGE_WORKDIR}", command]}},
                }
            ),
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=log_group)),
            timeout=Duration.hours(2),
            # Two schedules overlapping must not run two builds over the same tables.
            concurrent_build_limit=1,
        )

    def _grant_athena_queries(self, role: iam.Role, workgroup: str, readable_databases: list[str]) -> None:
        """Queries in one workgroup, over the catalog entries of `readable_databases`."""
        role.add_to_policy(
            iam.PolicyStatement(
                actions=list(ATHENA_QUERY),
                resources=[self.format_arn(service="athena", resource="workgroup", resource_name=workgroup)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["athena:GetDataCatalog"],
                resources=[self.format_arn(service="athena", resource="datacatalog", resource_name="AwsDataCatalog")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(GLUE_CATALOG_READ), resources=glue_database_resources(self, readable_databases))
        )

    def _grant_dbt_role(self) -> None:
        role, config = self.dbt_role, self.config
        self._grant_athena_queries(role, self.dbt_workgroup.name, [config.raw_database])
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[*GLUE_CATALOG_READ, *GLUE_CATALOG_WRITE], resources=glue_database_resources(self, config.dbt_schemas)
            )
        )
        # The on-run-start hook runs `create schema if not exists <target schema>` on every
        # build (dbt-athena's athena__create_schema), and Athena asks for glue:CreateDatabase
        # even when the database exists (dbt-labs/dbt-athena issue 716). The stack creates
        # the database, so this grant creates nothing; it names only that database.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["glue:CreateDatabase"],
                resources=[glue_catalog_arn(self), glue_database_arn(self, config.athena_schema)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(S3_OBJECT_READ), resources=[self.lake_bucket.arn_for_objects(f"{RAW_PREFIX}/*")])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.lake_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [RAW_PREFIX, f"{RAW_PREFIX}/*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
                resources=[
                    self.curated_bucket.arn_for_objects(f"{CURATED_PREFIX}/*"),
                    self.athena_results_bucket.arn_for_objects(f"{DBT_RESULTS_PREFIX}/*"),
                ],
            )
        )
        for bucket, prefix in ((self.curated_bucket, CURATED_PREFIX), (self.athena_results_bucket, DBT_RESULTS_PREFIX)):
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
                )
            )
        self._grant_bucket_location(role, [self.lake_bucket, self.curated_bucket, self.athena_results_bucket])
        role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[self.data_key.key_arn]))

    def _grant_bucket_location(self, role: iam.Role, buckets: list[s3.Bucket]) -> None:
        """Athena checks the Region of the result and data buckets with GetBucketLocation.
        Its own statement, without a condition: a GetBucketLocation request carries no
        s3:prefix, so a statement conditioned on s3:prefix never grants it
        (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html)."""
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn for bucket in buckets])
        )

    # --- analysts -----------------------------------------------------------------------

    def _analyst_access(self) -> None:
        config = self.config
        principals = [iam.ArnPrincipal(arn) for arn in config.analyst_principal_arns] or [iam.AccountRootPrincipal()]
        self.analyst_role = iam.Role(
            self,
            "AnalystRole",
            role_name=f"{config.prefix}-analyst",
            assumed_by=iam.CompositePrincipal(*principals),
            description=f"Reads the marts ({config.curated_schemas['marts']}) through Athena, nothing else",
            max_session_duration=Duration.hours(8),
        )
        marts = config.curated_schemas["marts"]
        role = self.analyst_role
        self._grant_athena_queries(role, self.analyst_workgroup.name, [marts])
        # dbt-athena's schema_table_unique naming puts a model's data under <s3_data_dir>/<schema>/<table>/.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=list(S3_OBJECT_READ), resources=[self.curated_bucket.arn_for_objects(f"{CURATED_PREFIX}/{marts}/*")]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.curated_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{CURATED_PREFIX}/{marts}", f"{CURATED_PREFIX}/{marts}/*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
                resources=[self.athena_results_bucket.arn_for_objects(f"{ANALYST_RESULTS_PREFIX}/*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.athena_results_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [ANALYST_RESULTS_PREFIX, f"{ANALYST_RESULTS_PREFIX}/*"]}},
            )
        )
        self._grant_bucket_location(role, [self.curated_bucket, self.athena_results_bucket])
        role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[self.data_key.key_arn]))
        CfnOutput(self, "AnalystRoleArn", value=role.role_arn)
        CfnOutput(self, "AnalystWorkGroupName", value=self.analyst_workgroup.name)

    # --- Lake Formation (opt-in) -----------------------------------------------------------

    def _lake_formation_grants(self) -> None:
        """The catalog grants of the IAM policies above, repeated in Lake Formation for an
        account where it enforces them (config lake_formation_grants). Each database
        is the stack's own, so every grant waits for its database."""
        config = self.config
        databases = {
            config.raw_database: self.raw_database,
            config.athena_schema: self.dbt_target_database,
            **{config.curated_schemas[layer]: database for layer, database in self.curated_databases.items()},
        }
        grants = [
            ("GlueJob", self.job_role, {config.raw_database: LF_WRITE}),
            ("Dbt", self.dbt_role, {config.raw_database: LF_READ, **{name: LF_WRITE for name in config.dbt_schemas}}),
            ("Analyst", self.analyst_role, {config.curated_schemas["marts"]: LF_READ}),
        ]
        for who, role, access in grants:
            principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
                data_lake_principal_identifier=role.role_arn
            )
            for name, permissions in access.items():
                resources = {
                    "database": lakeformation.CfnPrincipalPermissions.ResourceProperty(
                        database=lakeformation.CfnPrincipalPermissions.DatabaseResourceProperty(
                            catalog_id=self.account, name=name
                        )
                    ),
                    "tables": lakeformation.CfnPrincipalPermissions.ResourceProperty(
                        table=lakeformation.CfnPrincipalPermissions.TableResourceProperty(
                            catalog_id=self.account, database_name=name, table_wildcard={}
                        )
                    ),
                }
                for kind, resource in resources.items():
                    grant = lakeformation.CfnPrincipalPermissions(
                        self,
                        f"{who}LakeFormation-{name}-{kind}",
                        principal=principal,
                        resource=resource,
                        permissions=permissions[kind],
                        permissions_with_grant_option=[],
                        catalog=self.account,
                    )
                    grant.add_dependency(databases[name])

    # --- alarms -------------------------------------------------------------------------

    def _alarms(self) -> None:
        config = self.config
        self.alarm_topic = sns.Topic(self, "AlarmTopic", display_name=f"{config.prefix} lakehouse alarms", master_key=self.data_key)
        self.alarm_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyInsecureTransport",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sns:Publish"],
                resources=[self.alarm_topic.topic_arn],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        if config.alarm_email:
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        # CloudWatch alarms and EventBridge publish to the encrypted topic with the key.
        for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):
            self.data_key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    # In a key policy "*" is the key itself.
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": self.account}},
                )
            )
        action = cloudwatch_actions.SnsAction(self.alarm_topic)
        job_dimensions = {metrics.JOB_DIMENSION: config.job_name}

        # The job's own lag, published after every micro-batch by streaming/io/metrics.py:
        # how far the newest event of the batch lies behind the time the batch ran. Glue's
        # streaming metrics (glue.driver.streaming.maxConsumerLagInMs) come from
        # glueContext.forEachBatch, and the job runs Spark's foreachBatch
        # (streaming/runtime/stream_loop.py), so that metric may never exist
        # (https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-concepts.html).
        lag = cloudwatch.Metric(
            namespace=metrics.METRICS_NAMESPACE,
            metric_name=metrics.EVENT_LAG_SECONDS,
            dimensions_map=job_dimensions,
            statistic="Maximum",
            period=Duration.minutes(5),
        )
        self._alarm(
            "ConsumerLagAlarm",
            lag,
            threshold=config.consumer_lag_alarm_seconds,
            evaluation_periods=3,
            description=f"{config.job_name} writes events more than {config.consumer_lag_alarm_seconds} s after they happened",
            # A batch without a decodable event publishes no lag, so silence here is also
            # a quiet stream; a stopped job is JobNotRunning's alarm, which breaches on silence.
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
            action=action,
        )
        batches = cloudwatch.Metric(
            namespace=metrics.METRICS_NAMESPACE,
            metric_name=metrics.BATCHES_COMPLETED,
            dimensions_map=job_dimensions,
            statistic="Sum",
            period=Duration.minutes(config.no_batch_alarm_minutes),
        )
        self._alarm(
            "JobNotRunningAlarm",
            batches,
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description=f"{config.job_name} completed no micro-batch in {config.no_batch_alarm_minutes} minutes",
            # No data at all is the clearest sign of a job that is not running.
            missing=cloudwatch.TreatMissingData.BREACHING,
            action=action,
        )
        quarantined = cloudwatch.Metric(
            namespace=metrics.METRICS_NAMESPACE,
            metric_name=metrics.RECORDS_QUARANTINED,
            dimensions_map=job_dimensions,
            statistic="Sum",
            period=Duration.hours(1),
        )
        self._alarm(
            "QuarantineGrowthAlarm",
            quarantined,
            threshold=config.quarantined_records_alarm_per_hour,
            description=f"more than {config.quarantined_records_alarm_per_hour} records quarantined in an hour",
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
            action=action,
        )
        # Items of a single-table design that match no entity land in its unrouted table:
        # nothing is lost, but analysts see none of them until the contract learns their
        # entity and `lakehouse unrouted replay` routes them (docs/operations.md).
        unrouted = cloudwatch.Metric(
            namespace=metrics.METRICS_NAMESPACE,
            metric_name=metrics.RECORDS_UNROUTED,
            dimensions_map=job_dimensions,
            statistic="Sum",
            period=Duration.hours(1),
        )
        self._alarm(
            "UnroutedItemsAlarm",
            unrouted,
            threshold=config.unrouted_records_alarm_per_hour,
            description=f"more than {config.unrouted_records_alarm_per_hour} changes in an hour matched no entity "
            "of their table's contract (they land in <table>_unrouted)",
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
            action=action,
        )
        for construct_id, project, what in (
            ("DbtBuildFailedAlarm", self.dbt_build, "dbt build"),
            ("SourceFreshnessFailedAlarm", self.dbt_freshness, "dbt source freshness"),
        ):
            self._alarm(
                construct_id,
                project.metric_failed_builds(period=Duration.hours(1), statistic="Sum"),
                threshold=0,
                description=f"{what} failed (CodeBuild project {project.project_name})",
                missing=cloudwatch.TreatMissingData.NOT_BREACHING,
                action=action,
            )
        events.Rule(
            self,
            "JobStateAlarmRule",
            description=f"Tells the alarm topic when a run of {config.job_name} ends",
            event_pattern=self._job_state_pattern(GLUE_ALARM_STATES),
            targets=[targets.SnsTopic(self.alarm_topic)],
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        missing: cloudwatch.TreatMissingData,
        action: cloudwatch_actions.SnsAction,
        evaluation_periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=f"{self.config.prefix}-{construct_id.removesuffix('Alarm')}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

