"""The deployment config and the job parameters it feeds, checked before any synthesis
(no Node.js needed)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from deploy import job_arguments
from deploy.config import ConfigError, load_config, parse_config, require_contracts
from deploy.job_arguments import JobArgumentsError, job_parameters
from streaming.contracts.loader import load_contracts
from streaming.runtime.package_zip import build_package_zip

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {
    "stream_arn": "arn:aws:kinesis:eu-west-1:123456789012:stream/cdc",
    "raw_base_path": "s3://lake/raw",
    "database": "dynamodb_raw",
    "quarantine_root": "s3://lake",
    "checkpoint_location": "s3://lake/checkpoints/job/",
}


def test_the_example_config_loads_with_its_tables():
    config = load_config(REPO / "deploy" / "config.example.yml")
    assert config.dynamodb_tables == ("customers", "orders")
    assert config.curated_schemas["marts"] == "lakehouse_marts"
    assert config.job_name == "lakehouse-dynamodb-cdc-to-raw"
    assert config.dbt_schemas[0] == "lakehouse"
    assert config.lake_formation_grants is False


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "dynamodb_tables"),
        ({"dynamodb_tables": ["orders"], "tables": ["x"]}, "unknown config keys: tables"),
        ({"dynamodb_tables": ["orders"], "job_arguments": {"windowsize": "5 seconds"}}, "windowsize are not optional parameters"),
        ({"dynamodb_tables": ["orders", "orders"]}, "listed twice"),
        ({"dynamodb_tables": ["orders"], "athena_schema": "Lake-House"}, "athena_schema"),
        ({"dynamodb_tables": ["orders"], "glue_worker_type": "Standard"}, "glue_worker_type"),
        ({"dynamodb_tables": ["orders"], "athena_bytes_scanned_cutoff": 1000}, "athena_bytes_scanned_cutoff"),
        ({"dynamodb_tables": ["orders"], "dbt_build_schedule": "hourly"}, "dbt_build_schedule"),
        ({"dynamodb_tables": ["orders"], "raw_database": "lakehouse_marts"}, "raw_database must differ"),
        ({"dynamodb_tables": ["orders"], "pii_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pii"}, "6-character suffix"),
        ({"dynamodb_tables": ["orders"], "analyst_principal_arns": ["analysts"]}, "analyst_principal_arns"),
        ({"dynamodb_tables": ["orders"], "alarm_email": "ops"}, "alarm_email"),
        # dbt's target schema is a database of the stack as well.
        ({"dynamodb_tables": ["orders"], "raw_database": "lakehouse"}, "raw_database must differ"),
        ({"dynamodb_tables": ["orders"], "lake_formation_grants": "yes"}, "lake_formation_grants"),
    ],
)
def test_invalid_settings_name_the_key(values, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(values)


def test_every_streamed_table_needs_a_packaged_contract():
    # The DynamoDB tables, not the raw tables: `app` is one table of several entities.
    packaged = {contract.table for contract in load_contracts().values()}
    assert {"app", "customers", "orders"} <= packaged and "app_users" not in packaged
    require_contracts(parse_config({"dynamodb_tables": sorted(packaged)}), packaged)
    with pytest.raises(ConfigError, match="no contract in streaming/contracts/ for inventory"):
        require_contracts(parse_config({"dynamodb_tables": ["orders", "inventory"]}), packaged)
    # A job reading its contracts from elsewhere is not checked against the repository's.
    elsewhere = parse_config({"dynamodb_tables": ["inventory"], "job_arguments": {"contracts_path": "/mnt/contracts"}})
    require_contracts(elsewhere, packaged)


def test_a_missing_config_file_says_where_to_start(tmp_path):
    with pytest.raises(ConfigError, match="config.example.yml"):
        load_config(tmp_path / "nope.yml")


def test_job_parameters_must_match_the_scripts_declared_names():
    assert job_parameters(REQUIRED, {"window_size": "30 seconds"})["--window_size"] == "30 seconds"
    with pytest.raises(JobArgumentsError, match="missing \\['database'\\]"):
        job_parameters({k: v for k, v in REQUIRED.items() if k != "database"}, {})
    with pytest.raises(JobArgumentsError, match="not optional parameters"):
        job_parameters(REQUIRED, {"retain_hour": "24"})


def test_the_glue_job_pins_the_modules_it_imports_and_needs_no_glue_4_logging_flag(monkeypatch):
    arguments = job_arguments.glue_system_arguments("s3://code/streaming.zip", "s3://tmp/", "s3://ui/")
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert arguments["--additional-python-modules"] == next(pin for pin in pins if pin.startswith("PyYAML=="))
    # Glue 5.x logs in real time; the flag is Glue 4.0's and earlier's
    # (https://docs.aws.amazon.com/glue/latest/dg/monitor-continuous-logging-enable.html).
    assert "--enable-continuous-cloudwatch-log" not in arguments
    monkeypatch.setattr(job_arguments, "GLUE_JOB_MODULES", ("PyYAML", "ruamel.yaml"))
    with pytest.raises(JobArgumentsError, match="ruamel.yaml"):
        job_arguments.glue_system_arguments("s3://code/streaming.zip", "s3://tmp/", "s3://ui/")


def test_a_parameter_added_to_the_script_breaks_the_stack_not_the_deploy(monkeypatch):
    # As if streaming/runtime/glue_job.py gained a required parameter the stack does not supply.
    monkeypatch.setattr(job_arguments, "REQUIRED_ARGS", (*job_arguments.REQUIRED_ARGS, "metrics_namespace"))
    with pytest.raises(JobArgumentsError, match="metrics_namespace"):
        job_parameters(REQUIRED, {})


def test_a_new_optional_parameter_of_the_script_is_accepted_without_stack_changes(monkeypatch):
    monkeypatch.setattr(job_arguments, "OPTIONAL_ARGS", {**job_arguments.OPTIONAL_ARGS, "retain_hours": "24"})
    assert job_parameters(REQUIRED, {"retain_hours": "48"})["--retain_hours"] == "48"


def test_the_package_zip_is_reproducible_and_importable(tmp_path):
    first = build_package_zip(tmp_path / "a" / "streaming.zip")
    second = build_package_zip(tmp_path / "b" / "streaming.zip")
    assert first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "streaming/__init__.py" in names and "streaming/runtime/glue_job.py" in names
    assert {n for n in names if n.startswith("streaming/samples/contracts/") and n.endswith(".yml")} == {
        f"streaming/samples/contracts/{p.name}" for p in (REPO / "streaming" / "samples" / "contracts").glob("*.yml")
    }
    assert "lakehouse_dbt/env.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Python imports the job module from the zip alone, as Glue does with --extra-py-files
    # (run outside the repository, so the checkout's own streaming/ is not on the path).
    probe = ("import streaming.runtime.glue_job as job, streaming.io.metrics; from streaming.contracts.loader import load_contracts; "
             "print(job.__file__); print(sorted(load_contracts()))")
    completed = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(first)!r}); {probe}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [f"{first}/streaming/runtime/glue_job.py", str(sorted(load_contracts()))], \
        "the job finds its packaged contracts inside the zip"
