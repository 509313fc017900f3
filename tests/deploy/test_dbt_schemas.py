"""Every schema the dbt project touches on Athena, read from the project itself as the
stack configures it, has its Glue database in the stack and its grants on the dbt role:
a model, seed or source in a new schema fails here, not in the first scheduled build."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cfn_template import grants, render, role_statements

REPO = Path(__file__).resolve().parents[2]
GLUE_WRITES = ("glue:CreateTable", "glue:UpdateTable", "glue:DeleteTable")


def dbt_build_environment(template: dict) -> dict[str, str]:
    """The plain environment variables of the scheduled `dbt build` project."""
    (project,) = [
        r["Properties"] for r in template["Resources"].values()
        if r["Type"] == "AWS::CodeBuild::Project" and render(r["Properties"]["Name"]).endswith("-dbt-build")
    ]
    return {v["Name"]: v["Value"] for v in project["Environment"]["EnvironmentVariables"] if isinstance(v["Value"], str)}


@pytest.fixture(scope="module")
def touched_schemas(synthesized, tmp_path_factory) -> dict[str, set[str]]:
    """{"written": ..., "read": ...}: the schemas of the parsed project for the athena
    target, with the schema names the stack gives the CodeBuild environment."""
    environment = dbt_build_environment(synthesized.template)
    target_path = tmp_path_factory.mktemp("dbt-target")
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO),
        "LAKEHOUSE_DBT_TARGET": "athena",
        "LAKEHOUSE_ATHENA_SCHEMA": environment["LAKEHOUSE_ATHENA_SCHEMA"],
        "LAKEHOUSE_RAW_DATABASE": environment["LAKEHOUSE_RAW_DATABASE"],
    }
    dbt = Path(sys.executable).with_name("dbt")
    completed = subprocess.run(
        [str(dbt), "parse", "--target", "athena", "--no-partial-parse",
         "--target-path", str(target_path), "--log-path", str(target_path / "logs")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]
    manifest = json.loads((target_path / "manifest.json").read_text())
    nodes = manifest["nodes"].values()
    written = {node["schema"] for node in nodes if node["resource_type"] in ("model", "seed", "snapshot")}
    written |= {node["schema"] for node in nodes if node["resource_type"] == "test" and node["config"].get("store_failures")}
    # The target schema itself: dbt-athena starts every query with it as the context
    # database (dbt-labs/dbt-athena, dbt-athena/src/dbt/adapters/athena/connections.py,
    # AthenaCursor._start_execution: QueryExecutionContext.Database = credentials.schema;
    # dbt-labs/dbt-athena issue 751), and the on-run-start hook
    # record_watermarks_for_data_tests creates it and a view in it.
    written.add(environment["LAKEHOUSE_ATHENA_SCHEMA"])
    read = {source["schema"] for source in manifest["sources"].values()}
    return {"written": written, "read": read}


@pytest.mark.dbt
def test_every_schema_dbt_touches_is_a_glue_database_of_the_stack(synthesized, touched_schemas):
    databases = {db["Properties"]["DatabaseInput"]["Name"] for db in synthesized.resources("AWS::Glue::Database").values()}
    touched = touched_schemas["written"] | touched_schemas["read"]
    assert synthesized.config.athena_schema in touched
    assert touched - databases == set()


@pytest.mark.dbt
def test_the_dbt_role_may_use_every_schema_dbt_touches(synthesized, touched_schemas):
    statements = role_statements(synthesized.template, "DbtRole")

    def tables(action: str) -> set[str]:
        return {r.rsplit(":table/", 1)[1][:-2] for r in grants(statements, action) if ":table/" in r}

    def databases(action: str) -> set[str]:
        return {r.rsplit(":database/", 1)[1] for r in grants(statements, action) if ":database/" in r}

    touched = touched_schemas["written"] | touched_schemas["read"]
    assert touched - databases("glue:GetDatabase") == set()
    assert touched - tables("glue:GetTable") == set()
    for action in GLUE_WRITES:
        assert touched_schemas["written"] - tables(action) == set(), action
    # The hook's `create schema if not exists` asks for glue:CreateDatabase even when
    # the database exists (dbt-labs/dbt-athena issue 716): granted on that one only.
    assert databases("glue:CreateDatabase") == {synthesized.config.athena_schema}
