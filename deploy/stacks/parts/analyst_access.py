"""What analysts may do: assume one role that queries the marts through their own
Athena workgroup, and nothing else."""
from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam

from deploy.config import DeployConfig
from deploy.stacks.iam_actions import KMS_USE, S3_OBJECT_READ, S3_OBJECT_WRITE
from deploy.stacks.parts.catalog import grant_athena_queries, grant_bucket_location
from deploy.stacks.parts.storage import ANALYST_RESULTS_PREFIX, CURATED_PREFIX, Storage


def add_analyst_access(
    stack: Stack, config: DeployConfig, storage: Storage, workgroup: athena.CfnWorkGroup
) -> iam.Role:
    marts = config.curated_schemas["marts"]
    curated, results = storage.curated_bucket, storage.athena_results_bucket
    principals = [iam.ArnPrincipal(arn) for arn in config.analyst_principal_arns] or [iam.AccountRootPrincipal()]
    role = iam.Role(
        stack,
        "AnalystRole",
        role_name=f"{config.prefix}-analyst",
        assumed_by=iam.CompositePrincipal(*principals),
        description=f"Reads the marts ({marts}) through Athena, nothing else",
        max_session_duration=Duration.hours(8),
    )
    grant_athena_queries(stack, role, workgroup.name, [marts])
    # dbt-athena's schema_table_unique naming puts a model's data under <s3_data_dir>/<schema>/<table>/.
    role.add_to_policy(
        iam.PolicyStatement(actions=list(S3_OBJECT_READ), resources=[curated.arn_for_objects(f"{CURATED_PREFIX}/{marts}/*")])
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[curated.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{CURATED_PREFIX}/{marts}", f"{CURATED_PREFIX}/{marts}/*"]}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[*S3_OBJECT_READ, *S3_OBJECT_WRITE],
            resources=[results.arn_for_objects(f"{ANALYST_RESULTS_PREFIX}/*")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[results.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [ANALYST_RESULTS_PREFIX, f"{ANALYST_RESULTS_PREFIX}/*"]}},
        )
    )
    grant_bucket_location(role, [curated, results])
    role.add_to_policy(iam.PolicyStatement(actions=list(KMS_USE), resources=[storage.data_key.key_arn]))
    CfnOutput(stack, "AnalystRoleArn", value=role.role_arn)
    CfnOutput(stack, "AnalystWorkGroupName", value=workgroup.name)
    return role
