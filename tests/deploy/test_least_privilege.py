"""Every IAM statement in the stack, walked: no wildcard actions, "*" resources only where
IAM has no narrower resource, and each role confined to its layer."""
from __future__ import annotations

import re

from cfn_template import as_list, grants, identity_statements, render, role_statements

# Actions that IAM lets name no resource but "*", each with the service authorization
# reference page that says so (https://docs.aws.amazon.com/service-authorization/latest/reference/):
STAR_RESOURCE_ACTIONS = {
    "kinesis:ListStreams",  # list_amazonkinesis.html: no resource type
    "cloudwatch:PutMetricData",  # list_amazoncloudwatch.html: no resource type (namespace condition instead)
    "ecr:GetAuthorizationToken",  # list_amazonelasticcontainerregistry.html: no resource type
}
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject")
GLUE_WRITES = ("glue:CreateTable", "glue:UpdateTable", "glue:DeleteTable", "glue:BatchCreatePartition")


def bucket(prefix: str) -> str:
    return r"\$\{" + prefix + r"[0-9A-F]{8}\.Arn\}"


def in_buckets(resources: list[str]) -> set[tuple[str, str]]:
    """(bucket construct, key pattern) of S3 object ARNs such as ${LakeBucket1A2B3C4D.Arn}/raw/*."""
    paths = set()
    for resource in resources:
        match = re.fullmatch(r"\$\{(\w+?)[0-9A-F]{8}\.Arn\}(/.*)", resource)
        assert match, f"not an object ARN of a bucket in this stack: {resource}"
        paths.add(match.groups())
    return paths


def stream_only(resources: list[str]) -> bool:
    return bool(resources) and all(re.fullmatch(r"\$\{ChangeStream[0-9A-F]{8}\.Arn\}", r) for r in resources)


def test_no_statement_allows_every_action_or_every_resource_needlessly(synthesized):
    statements = list(identity_statements(synthesized.template))
    assert len(statements) > 40
    for policy, statement in statements:
        actions = as_list(statement["Action"])
        assert "*" not in actions, policy
        assert not [a for a in actions if a.endswith(":*")], (policy, actions)
        resources = [render(r) for r in as_list(statement["Resource"])]
        if "*" in resources:
            assert statement["Effect"] == "Allow"
            assert set(actions) <= STAR_RESOURCE_ACTIONS, (policy, actions)
            if "cloudwatch:PutMetricData" in actions:
                assert "cloudwatch:namespace" in statement["Condition"]["StringEquals"]


def test_no_role_carries_a_managed_policy(synthesized):
    # Managed policies (AWSLambdaBasicExecutionRole and the like) grant on "*".
    for lid, role in synthesized.resources("AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), lid


def test_the_glue_job_writes_only_raw_quarantine_and_checkpoints(synthesized):
    statements = role_statements(synthesized.template, "GlueJobRole")
    for action in WRITE_ACTIONS:
        assert in_buckets(grants(statements, action)) == {
            ("LakeBucket", "/raw/*"),
            ("LakeBucket", "/quarantine/*"),
            ("LakeBucket", "/checkpoints/*"),
            ("ArtifactsBucket", "/glue-temp/*"),
            ("ArtifactsBucket", "/spark-ui/*"),
        }
    raw = synthesized.config.raw_database
    for action in GLUE_WRITES:
        tables = [r for r in grants(statements, action) if ":table/" in r]
        assert [r.rsplit(":table/", 1)[1] for r in tables] == [f"{raw}/*"]
    assert stream_only(grants(statements, "kinesis:GetRecords"))
    assert not grants(statements, "kinesis:PutRecords")
    assert not grants(statements, "athena:StartQueryExecution")


def test_dbt_reads_raw_and_writes_only_curated(synthesized):
    config = synthesized.config
    statements = role_statements(synthesized.template, "DbtRole")
    read = in_buckets(grants(statements, "s3:GetObject"))
    assert {path for path in read if path[0] == "LakeBucket"} == {("LakeBucket", "/raw/*")}
    for action in WRITE_ACTIONS:
        assert in_buckets(grants(statements, action)) == {("CuratedBucket", "/dbt/*"), ("AthenaResultsBucket", "/dbt/*")}
    for action in GLUE_WRITES:
        databases = sorted(r.rsplit(":table/", 1)[1][:-2] for r in grants(statements, action) if ":table/" in r)
        assert databases == sorted(config.curated_schemas.values())
        assert config.raw_database not in databases
    read_tables = {r.rsplit(":table/", 1)[1][:-2] for r in grants(statements, "glue:GetTable") if ":table/" in r}
    assert read_tables == {config.raw_database, *config.curated_schemas.values()}
    workgroups = [r.rsplit("workgroup/", 1)[1] for r in grants(statements, "athena:StartQueryExecution")]
    assert workgroups == [f"{config.prefix}-dbt"]
    (secret,) = grants(statements, "secretsmanager:GetSecretValue")
    assert secret.startswith("${PiiKey")


def test_analysts_read_the_marts_and_nothing_else(synthesized):
    config = synthesized.config
    marts = config.curated_schemas["marts"]
    statements = role_statements(synthesized.template, "AnalystRole")
    databases = {
        r.split(":database/", 1)[1] for r in grants(statements, "glue:GetTable") if ":database/" in r
    } | {r.split(":table/", 1)[1][:-2] for r in grants(statements, "glue:GetTable") if ":table/" in r}
    assert databases == {marts}
    assert in_buckets(grants(statements, "s3:GetObject")) == {
        ("CuratedBucket", f"/dbt/{marts}/*"),
        ("AthenaResultsBucket", "/analysts/*"),
    }
    assert in_buckets(grants(statements, "s3:PutObject")) == {("AthenaResultsBucket", "/analysts/*")}
    assert not grants(statements, "glue:CreateTable")
    assert not grants(statements, "secretsmanager:GetSecretValue")
    workgroups = [r.rsplit("workgroup/", 1)[1] for r in grants(statements, "athena:StartQueryExecution")]
    assert workgroups == [f"{config.prefix}-analysts"]
    listing = [s for s in statements if "s3:ListBucket" in as_list(s["Action"]) and "CuratedBucket" in render(s["Resource"])]
    (curated_listing,) = listing
    assert curated_listing["Condition"]["StringLike"]["s3:prefix"] == [f"dbt/{marts}", f"dbt/{marts}/*"]


def test_the_job_keeper_may_only_read_and_start_its_job(synthesized):
    statements = role_statements(synthesized.template, "JobKeeperRole")
    actions = sorted(a for s in statements for a in as_list(s["Action"]))
    assert actions == ["glue:GetJobRuns", "glue:StartJobRun", "logs:CreateLogStream", "logs:PutLogEvents"]
    (job,) = grants(statements, "glue:StartJobRun")
    assert job.endswith(f":job/{synthesized.config.job_name}")


def test_the_destination_provider_touches_only_the_listed_tables(synthesized):
    statements = role_statements(synthesized.template, "KinesisDestinationRole")
    tables = sorted(r.rsplit(":table/", 1)[1] for r in grants(statements, "dynamodb:EnableKinesisStreamingDestination"))
    # One policy per custom resource, each naming its own table.
    assert tables == sorted(synthesized.config.dynamodb_tables)
    assert stream_only(grants(statements, "kinesis:PutRecords"))
