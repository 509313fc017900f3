"""The stack under non-default settings (variant_config.py): a provisioned stream, an
existing PII secret, named analysts, an alarm e-mail, an optional job parameter and
Lake Formation grants."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cfn_template import grants, render, role_statements
from variant_config import ANALYST, SECRET

from deploy.static_checks import cfn_lint


@pytest.fixture(scope="module")
def template(variant_synthesized) -> dict:
    return variant_synthesized.template


def of_type(template: dict, kind: str) -> list[dict]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_a_provisioned_stream_has_its_shards(template):
    (stream,) = of_type(template, "AWS::Kinesis::Stream")
    assert stream["ShardCount"] == 3
    assert stream["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}


def test_an_existing_pii_secret_is_used_not_created(template):
    assert of_type(template, "AWS::SecretsManager::Secret") == []
    for project in of_type(template, "AWS::CodeBuild::Project"):
        variables = {v["Name"]: v for v in project["Environment"]["EnvironmentVariables"]}
        assert variables["LAKEHOUSE_PII_KEY"] == {"Name": "LAKEHOUSE_PII_KEY", "Type": "SECRETS_MANAGER", "Value": SECRET}
    # CDK's CodeBuild grant appends "*": an environment variable may name the secret with
    # a JSON key or version after its ARN.
    assert grants(role_statements(template, "DbtRole"), "secretsmanager:GetSecretValue") == [SECRET + "*"]


def test_only_the_named_principals_may_assume_the_analyst_role(template):
    (role,) = [r for r in of_type(template, "AWS::IAM::Role") if r.get("RoleName") == "shop-analyst"]
    principals = [render(s["Principal"]["AWS"]) for s in role["AssumeRolePolicyDocument"]["Statement"]]
    assert principals == [ANALYST]


def test_the_alarm_email_is_subscribed(template):
    (subscription,) = of_type(template, "AWS::SNS::Subscription")
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "data-oncall@example.com")


def test_optional_job_parameters_and_names_follow_the_config(template):
    (job,) = of_type(template, "AWS::Glue::Job")
    assert job["Name"] == "shop-dynamodb-cdc-to-raw"
    assert job["DefaultArguments"]["--starting_position"] == "latest"
    assert job["DefaultArguments"]["--sync_mode"] == "glue"
    assert len(of_type(template, "Custom::AWS")) == 1


def test_lake_formation_grants_give_each_role_its_databases(template):
    # AWS::LakeFormation::PrincipalPermissions, one per role, database and its tables
    # (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-lakeformation-principalpermissions.html).
    roles = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    role_of = {prefix: next(lid for lid in roles if lid.startswith(prefix)) for prefix in ("GlueJobRole", "DbtRole", "AnalystRole")}
    granted: dict[tuple[str, str, str], set[str]] = {}
    for grant in of_type(template, "AWS::LakeFormation::PrincipalPermissions"):
        principal = render(grant["Principal"]["DataLakePrincipalIdentifier"])
        role = next(prefix for prefix, lid in role_of.items() if principal == "${%s.Arn}" % lid)
        resource = grant["Resource"]
        if "Database" in resource:
            key = (role, resource["Database"]["Name"], "database")
        else:
            assert resource["Table"]["TableWildcard"] == {}
            key = (role, resource["Table"]["DatabaseName"], "tables")
        granted[key] = set(grant["Permissions"])
        assert grant["PermissionsWithGrantOption"] == []
    # The config keeps the default athena_schema, lakehouse.
    dbt_schemas = ["lakehouse", *(f"lakehouse_{layer}" for layer in ("staging", "intermediate", "marts", "snapshots", "seeds"))]
    assert {key for key in granted} == {
        ("GlueJobRole", "dynamodb_raw", "database"), ("GlueJobRole", "dynamodb_raw", "tables"),
        ("DbtRole", "dynamodb_raw", "database"), ("DbtRole", "dynamodb_raw", "tables"),
        *((("DbtRole", name, kind) for name in dbt_schemas for kind in ("database", "tables"))),
        ("AnalystRole", "lakehouse_marts", "database"), ("AnalystRole", "lakehouse_marts", "tables"),
    }
    assert "CREATE_TABLE" in granted[("GlueJobRole", "dynamodb_raw", "database")]
    assert {"INSERT", "DELETE"} <= granted[("GlueJobRole", "dynamodb_raw", "tables")]
    assert granted[("DbtRole", "dynamodb_raw", "tables")] == {"SELECT", "DESCRIBE"}
    assert all("CREATE_TABLE" in granted[("DbtRole", name, "database")] for name in dbt_schemas)
    assert granted[("AnalystRole", "lakehouse_marts", "database")] == {"DESCRIBE"}
    assert granted[("AnalystRole", "lakehouse_marts", "tables")] == {"SELECT", "DESCRIBE"}


def test_the_variant_template_passes_cfn_lint(template, tmp_path):
    # The Lake Formation grants exist only here; cfn-lint checks their required properties.
    path = tmp_path / "variant.template.json"
    path.write_text(json.dumps(template))
    completed = cfn_lint(Path(sys.executable).with_name("cfn-lint"), [path])
    assert completed.returncode == 0, completed.stdout + completed.stderr
