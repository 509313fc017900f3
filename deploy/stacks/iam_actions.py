"""IAM action sets shared by the roles, so each role's grant reads as what it may do.

Glue Data Catalog actions need the catalog, the database and the table ARNs in the
statement's resources
(https://docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html).
"""
from __future__ import annotations

from aws_cdk import Stack

GLUE_CATALOG_READ = (
    "glue:GetDatabase",
    "glue:GetDatabases",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
)
GLUE_CATALOG_WRITE = (
    "glue:CreateTable",
    "glue:UpdateTable",
    "glue:DeleteTable",
    "glue:BatchDeleteTable",
    "glue:GetTableVersions",
    "glue:DeleteTableVersion",
    "glue:BatchDeleteTableVersion",
    "glue:CreatePartition",
    "glue:BatchCreatePartition",
    "glue:UpdatePartition",
    "glue:BatchUpdatePartition",
    "glue:DeletePartition",
    "glue:BatchDeletePartition",
)
S3_OBJECT_READ = ("s3:GetObject", "s3:GetObjectVersion")
S3_OBJECT_WRITE = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
ATHENA_QUERY = (
    "athena:StartQueryExecution",
    "athena:StopQueryExecution",
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:GetQueryResultsStream",
    "athena:BatchGetQueryExecution",
    "athena:ListQueryExecutions",
    "athena:GetWorkGroup",
)
KMS_USE = ("kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey")


def glue_catalog_arn(stack: Stack) -> str:
    return stack.format_arn(service="glue", resource="catalog")


def glue_database_arn(stack: Stack, database: str) -> str:
    return stack.format_arn(service="glue", resource="database", resource_name=database)


def glue_tables_arn(stack: Stack, database: str) -> str:
    return stack.format_arn(service="glue", resource="table", resource_name=f"{database}/*")


def glue_database_resources(stack: Stack, databases: list[str]) -> list[str]:
    """The catalog, the databases and every table in them."""
    return [
        glue_catalog_arn(stack),
        *(glue_database_arn(stack, name) for name in databases),
        *(glue_tables_arn(stack, name) for name in databases),
    ]
