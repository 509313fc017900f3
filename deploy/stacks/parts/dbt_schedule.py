"""Scheduled dbt on Athena: the PII key, dbt's role, its image, and two CodeBuild
projects (build, source freshness) that EventBridge schedules run."""
from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager

from deploy.config import DeployConfig
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
from deploy.stacks.parts.catalog import grant_athena_queries, grant_bucket_location
from deploy.stacks.parts.storage import CURATED_PREFIX, DBT_RESULTS_PREFIX, RAW_PREFIX, Storage
from streaming.contracts.loader import SAMPLES_DBT_VAR, ContractSet

DBT_IMAGE_WORKDIR = "/opt/lakehouse"


@dataclass(frozen=True)
class DbtSchedule:
    build: codebuild.Project
    freshness: codebuild.Project
    role: iam.Role


def add_dbt_schedule(
    stack: Stack, config: DeployConfig, storage: Storage, workgroup: athena.CfnWorkGroup, contracts: ContractSet
) -> DbtSchedule:
    if config.pii_secret_arn:
        pii_secret = secretsmanager.Secret.from_secret_complete_arn(stack, "PiiKey", config.pii_secret_arn)
    else:
        pii_secret = secretsmanager.Secret(
            stack,
            "PiiKey",
            description=f"{config.prefix}: key of the marts' PII pseudonyms (LAKEHOUSE_PII_KEY)",
            encryption_key=storage.data_key,
            generate_secret_string=secretsmanager.SecretStringGenerator(password_length=64, exclude_punctuation=True),
            removal_policy=RemovalPolicy.RETAIN,
        )
    role = iam.Role(
        stack,
        "DbtRole",
        assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
        description="Scheduled dbt: reads raw, writes the curated schemas",
    )
    _grant_dbt_role(stack, config, role, storage, workgroup)
    # CodeBuild's LINUX_CONTAINER environments run x86_64, whatever machine deploys
    # (https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-compute-types.html):
    # an image built natively on an arm64 laptop would not start there.
    image = codebuild.LinuxBuildImage.from_asset(
        stack, "DbtImage", directory=str(REPO_ROOT), platform=ecr_assets.Platform.LINUX_AMD64
    )
    environment = {
        "LAKEHOUSE_DBT_TARGET": "athena",
        "AWS_REGION": stack.region,
        "LAKEHOUSE_RAW_DATABASE": config.raw_database,
        "LAKEHOUSE_ATHENA_SCHEMA": config.athena_schema,
        "LAKEHOUSE_ATHENA_S3_STAGING_DIR": storage.athena_results_bucket.s3_url_for_object(f"{DBT_RESULTS_PREFIX}/"),
        "LAKEHOUSE_ATHENA_S3_DATA_DIR": storage.curated_bucket.s3_url_for_object(f"{CURATED_PREFIX}/"),
        "LAKEHOUSE_ATHENA_WORK_GROUP": workgroup.name,
    }
    variables = {name: codebuild.BuildEnvironmentVariable(value=value) for name, value in environment.items()}
    variables["LAKEHOUSE_PII_KEY"] = codebuild.BuildEnvironmentVariable(
        type=codebuild.BuildEnvironmentVariableType.SECRETS_MANAGER, value=pii_secret.secret_arn
    )

    # The sample tables' models and sources are enabled by default (dbt_project.yml); a job
    # packaged with the user's own contracts writes no raw table of theirs to read.
    without_samples = "" if contracts.is_samples else f" --vars '{{{SAMPLES_DBT_VAR}: false}}'"

    def project(construct_id: str, suffix: str, command: str) -> codebuild.Project:
        log_group = storage.log_group(stack, f"{construct_id}Logs", logs.RetentionDays.THREE_MONTHS)
        return codebuild.Project(
            stack,
            construct_id,
            project_name=f"{config.prefix}-dbt-{suffix}",
            description=f"{command} against the athena target",
            role=role,
            encryption_key=storage.data_key,
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

    build = project(
        "DbtBuild",
        "build",
        # The models read the PII key from a table the key publisher writes first;
        # unit tests check SQL logic and run in CI (docs/dbt.md, "Tests").
        f"python -m lakehouse_dbt.athena_pii_key && dbt build --exclude-resource-type unit_test{without_samples}",
    )
    freshness = project("DbtSourceFreshness", "source-freshness", f"dbt source freshness{without_samples}")
    for construct_id, scheduled, schedule in (
        ("DbtBuildSchedule", build, config.dbt_build_schedule),
        ("DbtFreshnessSchedule", freshness, config.dbt_freshness_schedule),
    ):
        events.Rule(
            stack,
            construct_id,
            description=f"Runs {scheduled.project_name}",
            schedule=events.Schedule.expression(schedule),
            targets=[targets.CodeBuildProject(scheduled)],
        )
    return DbtSchedule(build, freshness, role)


def _grant_dbt_role(
    stack: Stack, config: DeployConfig, role: iam.Role, storage: Storage, workgroup: athena.CfnWorkGroup
) -> None:
    lake, curated, results = storage.lake_bucket, storage.curated_bucket, storage.athena_results_bucket
    grant_athena_queries(stack, role, workgroup.name, [config.raw_database])
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*GLUE_CATALOG_READ, *GLUE_CATALOG_WRITE], resources=glue_database_resources(stack, config.dbt_schemas)
        )
    )
    # The on-run-start hook runs `create schema if not exists <target schema>` on every
    # build (dbt-athena's athena__create_schema), and Athena asks for glue:CreateDatabase
    # even when the database exists (dbt-labs/dbt-athena issue 716). The stack creates
    # the database, so this grant creates nothing; it names only that database.
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["glue:CreateDatabase"],
            resources=[glue_catalog_arn(stack), glue_database_arn(stack, config.athena_schema)],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(actions=list(S3_OBJECT_READ), resources=[lake.arn_for_objects(f"{RAW_PREFIX}/*")])
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[lake.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [RAW_PREFIX, f"{RAW_PREFIX}/*"]}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
            resources=[
                curated.arn_for_objects(f"{CURATED_PREFIX}/*"),
                results.arn_for_objects(f"{DBT_RESULTS_PREFIX}/*"),
            ],
        )
    )
    for bucket, prefix in ((curated, CURATED_PREFIX), (results, DBT_RESULTS_PREFIX)):
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
            )
        )
    grant_bucket_location(role, [lake, curated, results])
    role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[storage.data_key.key_arn]))
