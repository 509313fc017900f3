"""The catalog grants of the roles' IAM policies, repeated in Lake Formation for an
account where it enforces them (config lake_formation_grants)."""
from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation

from deploy.config import DeployConfig
from deploy.stacks.parts.catalog import Catalog

# Lake Formation permissions of a role that reads a database, and of one that writes it
# (https://docs.aws.amazon.com/lake-formation/latest/dg/lf-permissions-reference.html).
LF_READ = {"database": ["DESCRIBE"], "tables": ["SELECT", "DESCRIBE"]}
LF_WRITE = {
    "database": ["DESCRIBE", "CREATE_TABLE", "ALTER"],
    "tables": ["SELECT", "INSERT", "DELETE", "DESCRIBE", "ALTER", "DROP"],
}


def add_lake_formation_grants(
    stack: Stack, config: DeployConfig, catalog: Catalog, job_role: iam.Role, dbt_role: iam.Role, analyst_role: iam.Role
) -> None:
    """Each role's databases and their tables. Each database is the stack's own, so
    every grant waits for its database."""
    grants = [
        ("GlueJob", job_role, {config.raw_database: LF_WRITE}),
        ("Dbt", dbt_role, {config.raw_database: LF_READ, **{name: LF_WRITE for name in config.dbt_schemas}}),
        ("Analyst", analyst_role, {config.curated_schemas["marts"]: LF_READ}),
    ]
    for who, role, access in grants:
        principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
            data_lake_principal_identifier=role.role_arn
        )
        for name, permissions in access.items():
            resources = {
                "database": lakeformation.CfnPrincipalPermissions.ResourceProperty(
                    database=lakeformation.CfnPrincipalPermissions.DatabaseResourceProperty(
                        catalog_id=stack.account, name=name
                    )
                ),
                "tables": lakeformation.CfnPrincipalPermissions.ResourceProperty(
                    table=lakeformation.CfnPrincipalPermissions.TableResourceProperty(
                        catalog_id=stack.account, database_name=name, table_wildcard={}
                    )
                ),
            }
            for kind, resource in resources.items():
                grant = lakeformation.CfnPrincipalPermissions(
                    stack,
                    f"{who}LakeFormation-{name}-{kind}",
                    principal=principal,
                    resource=resource,
                    permissions=permissions[kind],
                    permissions_with_grant_option=[],
                    catalog=stack.account,
                )
                grant.add_dependency(catalog.databases[name])
