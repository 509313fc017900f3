"""Every IAM statement in the stack, walked: no wildcard actions, "*" resources only where
IAM has no narrower resource, and each role confined to its layer."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from cfn_template import as_list, grants, identity_statements, render, role_statements

# Actions that IAM lets name no resource but "*", each with the service authorization
# reference page that says so (https://docs.aws.amazon.com/service-authorization/latest/reference/):
STAR_RESOURCE_ACTIONS = {
    "kinesis:ListStreams",  # list_amazonkinesis.html: no resource type
    "cloudwatch:PutMetricData",  # list_amazoncloudwatch.html: no resource type (namespace condition instead)
    "ecr:GetAuthorizationToken",  # list_amazonelasticcontainerregistry.html: no resource type
}
# The S3 condition keys each S3 action of this stack's policies supports, from the
# "Condition keys" column of "Actions defined by Amazon S3" in the Service Authorization
# Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
# First the keys every S3 request carries, then each action's own that this stack might
# use (the reference lists more: add them from there when a policy needs one).
# s3:prefix, s3:delimiter and s3:max-keys are parameters of a listing, carried by no other request.
S3_REQUEST_KEYS = {
    "s3:authType", "s3:signatureAge", "s3:signatureversion", "s3:TlsVersion",
    "s3:x-amz-content-sha256", "s3:ResourceAccount", "s3:AccessGrantsInstanceArn",
    "s3:DataAccessPointAccount", "s3:DataAccessPointArn", "s3:AccessPointNetworkOrigin",
}
S3_ACTION_CONDITION_KEYS = {
    "s3:ListBucket": S3_REQUEST_KEYS | {"s3:delimiter", "s3:max-keys", "s3:prefix"},
    "s3:GetBucketLocation": S3_REQUEST_KEYS,
    "s3:GetObject": S3_REQUEST_KEYS,
    "s3:GetObjectVersion": S3_REQUEST_KEYS | {"s3:versionid"},
    "s3:PutObject": S3_REQUEST_KEYS | {"s3:x-amz-server-side-encryption", "s3:x-amz-server-side-encryption-aws-kms-key-id"},
    "s3:DeleteObject": S3_REQUEST_KEYS,
    "s3:AbortMultipartUpload": S3_REQUEST_KEYS,
    "s3:ListMultipartUploadParts": S3_REQUEST_KEYS,
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


def every_statement(value: Any) -> Iterator[dict]:
    """Every policy statement anywhere in a template: identity, bucket, key and topic policies."""
    if isinstance(value, dict):
        if isinstance(value.get("Statement"), list):
            yield from value["Statement"]
        else:
            for item in value.values():
                yield from every_statement(item)
    elif isinstance(value, list):
        for item in value:
            yield from every_statement(item)


def test_every_s3_condition_key_is_one_its_actions_requests_carry(synthesized):
    # A statement allows an action only when its condition holds; a key the action's
    # requests never carry makes it never hold (as s3:GetBucketLocation beside
    # s3:ListBucket under s3:prefix did), and a Deny under such a key never denies.
    conditioned = 0
    for statement in every_statement(synthesized.template["Resources"]):
        keys = {key for clause in statement.get("Condition", {}).values() for key in clause if key.startswith("s3:")}
        if not keys:
            continue
        conditioned += 1
        for action in as_list(statement["Action"]):
            assert action in S3_ACTION_CONDITION_KEYS, f"{action}: add its condition keys to the table, from the reference"
            assert keys <= S3_ACTION_CONDITION_KEYS[action], (action, keys - S3_ACTION_CONDITION_KEYS[action])
    assert conditioned >= 5


def test_dbt_and_analysts_may_locate_their_buckets(synthesized):
    # Athena checks the Region of the result bucket with GetBucketLocation before a query.
    expected = {"DbtRole": {"LakeBucket", "CuratedBucket", "AthenaResultsBucket"}, "AnalystRole": {"CuratedBucket", "AthenaResultsBucket"}}
    for role, buckets in expected.items():
        statements = [s for s in role_statements(synthesized.template, role) if "s3:GetBucketLocation" in as_list(s["Action"])]
        assert all("Condition" not in s for s in statements), role
        located = {re.fullmatch(r"\$\{(\w+?)[0-9A-F]{8}\.Arn\}", render(r)).group(1) for s in statements for r in as_list(s["Resource"])}
        assert located == buckets, role


def test_the_glue_job_may_create_only_the_default_database(synthesized):
    # Spark creates "default" when the catalog has none (SharedState.externalCatalog).
    statements = role_statements(synthesized.template, "GlueJobRole")
    created = sorted(r.rsplit(":", 1)[1] for r in grants(statements, "glue:CreateDatabase"))
    assert created == ["catalog", "database/default"]


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
        assert databases == sorted([config.athena_schema, *config.curated_schemas.values()])
        assert config.raw_database not in databases
    read_tables = {r.rsplit(":table/", 1)[1][:-2] for r in grants(statements, "glue:GetTable") if ":table/" in r}
    assert read_tables == {config.raw_database, config.athena_schema, *config.curated_schemas.values()}
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
    updated = sorted(r.rsplit(":table/", 1)[1] for r in grants(statements, "dynamodb:UpdateKinesisStreamingDestination"))
    assert updated == tables
    assert stream_only(grants(statements, "kinesis:PutRecords"))
