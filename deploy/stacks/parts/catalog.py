"""The Glue databases the stack creates (raw, dbt's target schema, dbt's layers), the
Athena workgroups of dbt and of analysts, and a role's grants to query through one."""
from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from deploy.config import DeployConfig
from deploy.stacks.iam_actions import ATHENA_QUERY, GLUE_CATALOG_READ, glue_database_resources
from deploy.stacks.parts.storage import ANALYST_RESULTS_PREFIX, DBT_RESULTS_PREFIX, Storage

ATHENA_ENGINE = "Athena engine version 3"


@dataclass(frozen=True)
class Catalog:
    # By database name.
    databases: dict[str, glue.CfnDatabase]
    dbt_workgroup: athena.CfnWorkGroup
    analyst_workgroup: athena.CfnWorkGroup


def add_catalog(stack: Stack, config: DeployConfig, storage: Storage) -> Catalog:
    databases = {
        config.raw_database: _add_database(
            stack, "RawDatabase", config.raw_database,
            "Raw DynamoDB change logs and current state (Hudi), written by the streaming job",
        ),
        **{
            name: _add_database(stack, f"Curated{layer.capitalize()}Database", name,
                                f"dbt {layer} models of {config.athena_schema} (Iceberg)")
            for layer, name in config.curated_schemas.items()
        },
        # dbt-athena starts every query with the target schema as its context database
        # (dbt-labs/dbt-athena, dbt-athena/src/dbt/adapters/athena/connections.py,
        # _start_execution), and the on-run-start hook keeps a view there
        # (macros/tests/changed_rows_only.sql): it must exist before the first build.
        config.athena_schema: _add_database(
            stack, "DbtTargetDatabase", config.athena_schema,
            f"dbt's target schema {config.athena_schema}: the context of its queries, its run-time views",
        ),
    }
    return Catalog(
        databases=databases,
        dbt_workgroup=_add_workgroup(stack, config, storage, "DbtWorkGroup", f"{config.prefix}-dbt", DBT_RESULTS_PREFIX),
        analyst_workgroup=_add_workgroup(
            stack, config, storage, "AnalystWorkGroup", f"{config.prefix}-analysts", ANALYST_RESULTS_PREFIX
        ),
    )


def _add_database(stack: Stack, construct_id: str, name: str, description: str) -> glue.CfnDatabase:
    return glue.CfnDatabase(
        stack,
        construct_id,
        catalog_id=stack.account,
        database_input=glue.CfnDatabase.DatabaseInputProperty(name=name, description=description),
    )


def _add_workgroup(
    stack: Stack, config: DeployConfig, storage: Storage, construct_id: str, name: str, results_prefix: str
) -> athena.CfnWorkGroup:
    return athena.CfnWorkGroup(
        stack,
        construct_id,
        name=name,
        state="ENABLED",
        work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
            # Clients cannot override the result location or its encryption.
            enforce_work_group_configuration=True,
            publish_cloud_watch_metrics_enabled=True,
            bytes_scanned_cutoff_per_query=config.athena_bytes_scanned_cutoff,
            engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version=ATHENA_ENGINE),
            result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                output_location=storage.athena_results_bucket.s3_url_for_object(f"{results_prefix}/"),
                encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                    encryption_option="SSE_KMS", kms_key=storage.data_key.key_arn
                ),
            ),
        ),
    )


def grant_athena_queries(stack: Stack, role: iam.Role, workgroup: str, readable_databases: list[str]) -> None:
    """Queries in one workgroup, over the catalog entries of `readable_databases`."""
    role.add_to_policy(
        iam.PolicyStatement(
            actions=list(ATHENA_QUERY),
            resources=[stack.format_arn(service="athena", resource="workgroup", resource_name=workgroup)],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["athena:GetDataCatalog"],
            resources=[stack.format_arn(service="athena", resource="datacatalog", resource_name="AwsDataCatalog")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(actions=list(GLUE_CATALOG_READ), resources=glue_database_resources(stack, readable_databases))
    )


def grant_bucket_location(role: iam.Role, buckets: list[s3.Bucket]) -> None:
    """Athena checks the Region of the result and data buckets with GetBucketLocation.
    Its own statement, without a condition: a GetBucketLocation request carries no
    s3:prefix, so a statement conditioned on s3:prefix never grants it
    (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html)."""
    role.add_to_policy(
        iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn for bucket in buckets])
    )
