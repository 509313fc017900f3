"""The deployment's settings: one small YAML file (deploy/config.example.yml shows every key).

Everything is checked here, before any construct exists, so a typo fails `make synth`
with the key's name instead of a half-built stack or a failed CloudFormation update.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from streaming.contracts.loader import ContractSet, choose_contracts, load_contract_folder
from streaming.runtime.glue_job import OPTIONAL_ARGS

# Worker types Glue offers for Spark streaming jobs
# (https://docs.aws.amazon.com/glue/latest/dg/add-job-streaming.html).
GLUE_STREAMING_WORKER_TYPES = ("G.025X", "G.1X", "G.2X", "G.4X", "G.8X")
_GLUE_NAME = re.compile(r"^[a-z0-9_]{1,200}$")
_DYNAMODB_TABLE = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_PREFIX = re.compile(r"^[a-z][a-z0-9-]{1,30}$")
# from_secret_complete_arn needs the ARN with Secrets Manager's 6-character suffix.
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$")
_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(root|role/.+|user/.+)$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SCHEDULE = re.compile(r"^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\([^)]+\))$")
# Athena's smallest per-query data usage control is 10 MB
# (https://docs.aws.amazon.com/athena/latest/ug/workgroups-setting-control-limits-cloudwatch.html).
ATHENA_MIN_BYTES_SCANNED_CUTOFF = 10_000_000


class ConfigError(ValueError):
    """The deployment config is invalid; the message names the key."""


@dataclass(frozen=True)
class DeployConfig:
    dynamodb_tables: tuple[str, ...]
    prefix: str = "lakehouse"
    raw_database: str = "dynamodb_raw"
    athena_schema: str = "lakehouse"
    stream_on_demand: bool = True
    stream_shard_count: int = 1
    stream_retention_hours: int = 24
    glue_worker_type: str = "G.1X"
    glue_number_of_workers: int = 2
    # Optional job parameters of streaming/runtime/glue_job.py (names without "--").
    job_arguments: Mapping[str, str] = field(default_factory=dict)
    quarantine_retention_days: int = 90
    athena_results_retention_days: int = 30
    noncurrent_version_retention_days: int = 7
    athena_bytes_scanned_cutoff: int = 10_000_000_000
    dbt_build_schedule: str = "cron(15 * * * ? *)"
    dbt_freshness_schedule: str = "rate(30 minutes)"
    # An existing Secrets Manager secret holding the PII key; empty: the stack creates one.
    pii_secret_arn: str = ""
    alarm_email: str = ""
    consumer_lag_alarm_seconds: int = 900
    no_batch_alarm_minutes: int = 15
    quarantined_records_alarm_per_hour: int = 100
    # Changes of single-table designs that match no entity of their contract, per hour:
    # 0 alarms on the first one (a kind of item the contract does not know has appeared).
    # Raise it above the rate of kinds left unrouted on purpose.
    unrouted_records_alarm_per_hour: int = 0
    # IAM principals allowed to assume the analyst role; empty: this account's administrators.
    analyst_principal_arns: tuple[str, ...] = ()
    # For accounts where Lake Formation enforces catalog permissions instead of IAM alone:
    # the stack then also grants each role its databases and tables in Lake Formation.
    lake_formation_grants: bool = False

    @property
    def curated_schemas(self) -> dict[str, str]:
        """dbt's layers -> the Athena schema (Glue database) each writes: dbt's default
        generate_schema_name appends the custom schema to the target schema."""
        return {layer: f"{self.athena_schema}_{layer}" for layer in ("staging", "intermediate", "marts", "snapshots", "seeds")}

    @property
    def dbt_schemas(self) -> list[str]:
        """Every Glue database dbt uses: the target schema itself, which dbt-athena names as
        the context database of every query it starts and where the on-run-start hook keeps
        its data_test_watermarks view (macros/tests/changed_rows_only.sql), then the layers'."""
        return [self.athena_schema, *self.curated_schemas.values()]

    @property
    def job_name(self) -> str:
        return f"{self.prefix}-dynamodb-cdc-to-raw"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def parse_config(values: Mapping[str, Any]) -> DeployConfig:
    known = {f.name for f in fields(DeployConfig)}
    unknown = sorted(set(values) - known)
    _require(not unknown, f"unknown config keys: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    values = dict(values)
    tables = values.get("dynamodb_tables") or ()
    _require(
        isinstance(tables, (list, tuple)) and len(tables) > 0,
        "dynamodb_tables: list the existing DynamoDB tables to stream",
    )
    values["dynamodb_tables"] = tuple(str(table) for table in tables)
    values["analyst_principal_arns"] = tuple(values.get("analyst_principal_arns") or ())
    values["job_arguments"] = {str(k): str(v) for k, v in (values.get("job_arguments") or {}).items()}
    config = DeployConfig(**values)

    for table in config.dynamodb_tables:
        _require(bool(_DYNAMODB_TABLE.match(table)), f"dynamodb_tables: {table!r} is not a DynamoDB table name")
    _require(len(set(config.dynamodb_tables)) == len(config.dynamodb_tables), "dynamodb_tables: a table is listed twice")
    _require(bool(_PREFIX.match(config.prefix)), f"prefix {config.prefix!r}: 2-31 lower-case letters, digits or '-'")
    for key in ("raw_database", "athena_schema"):
        name = getattr(config, key)
        _require(bool(_GLUE_NAME.match(name)), f"{key} {name!r}: lower-case letters, digits and '_' only (Athena)")
    _require(config.raw_database not in config.dbt_schemas, "raw_database must differ from dbt's schemas")
    unknown_args = sorted(set(config.job_arguments) - set(OPTIONAL_ARGS))
    _require(
        not unknown_args,
        f"job_arguments: {', '.join(unknown_args)} are not optional parameters of streaming/runtime/glue_job.py "
        f"({', '.join(OPTIONAL_ARGS)})",
    )
    _require(
        config.glue_worker_type in GLUE_STREAMING_WORKER_TYPES,
        f"glue_worker_type {config.glue_worker_type!r}: one of {', '.join(GLUE_STREAMING_WORKER_TYPES)}",
    )
    _require(config.glue_number_of_workers >= 2, "glue_number_of_workers: at least 2 (a driver and an executor)")
    # Kinesis retention: 24 hours to 365 days
    # (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_IncreaseStreamRetentionPeriod.html).
    _require(24 <= config.stream_retention_hours <= 8760, "stream_retention_hours: 24 to 8760")
    _require(config.stream_shard_count >= 1, "stream_shard_count: at least 1")
    for key in ("quarantine_retention_days", "athena_results_retention_days", "noncurrent_version_retention_days"):
        _require(getattr(config, key) >= 1, f"{key}: at least 1 day")
    _require(
        config.athena_bytes_scanned_cutoff >= ATHENA_MIN_BYTES_SCANNED_CUTOFF,
        f"athena_bytes_scanned_cutoff: at least {ATHENA_MIN_BYTES_SCANNED_CUTOFF} bytes (Athena's minimum)",
    )
    for key in ("dbt_build_schedule", "dbt_freshness_schedule"):
        _require(bool(_SCHEDULE.match(getattr(config, key))), f"{key}: an EventBridge rate(...) or cron(...) expression")
    for key in ("consumer_lag_alarm_seconds", "no_batch_alarm_minutes"):
        _require(getattr(config, key) >= 1, f"{key}: at least 1")
    for key in ("quarantined_records_alarm_per_hour", "unrouted_records_alarm_per_hour"):
        _require(getattr(config, key) >= 0, f"{key}: 0 or more")
    _require(
        not config.pii_secret_arn or bool(_SECRET_ARN.match(config.pii_secret_arn)),
        "pii_secret_arn: the secret's complete ARN, including its 6-character suffix",
    )
    _require(not config.alarm_email or bool(_EMAIL.match(config.alarm_email)), "alarm_email: an e-mail address")
    _require(isinstance(config.lake_formation_grants, bool), "lake_formation_grants: true or false")
    for arn in config.analyst_principal_arns:
        _require(bool(_PRINCIPAL_ARN.match(arn)), f"analyst_principal_arns: {arn!r} is not an IAM role, user or account root ARN")
    return config


def require_contracts(config: DeployConfig, contract_tables: set[str]) -> None:
    """Every streamed table needs a contract shipped with the job: without one, each of
    its changes would be quarantined as unknown_table. A job given its own
    `contracts_path` reads contracts this repository cannot see, so nothing is checked."""
    if "contracts_path" in config.job_arguments:
        return
    missing = [table for table in config.dynamodb_tables if table not in contract_tables]
    _require(
        not missing,
        f"dynamodb_tables: no contract in streaming/contracts/ for {', '.join(missing)} "
        "(the job would quarantine all their changes as unknown_table)",
    )


def deployed_contracts(config: DeployConfig, report: Callable[[str], None]) -> ContractSet:
    """The contracts the job is packaged with (choose_contracts), checked against the
    streamed tables: the demo's sample tables pass only for a config that names them,
    and are then said to be the samples."""
    contracts = choose_contracts()
    # The DynamoDB tables, not the raw tables: `app` is one table of several entities.
    require_contracts(config, {contract.table for contract in load_contract_folder(contracts.folder).values()})
    notice = contracts.fallback_notice()
    if notice is not None:
        report(f"WARNING: the job streams the demo's tables: {notice}")
    return contracts


def load_config(path: str | Path) -> DeployConfig:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: deployment config not found (copy deploy/config.example.yml)")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings")
    try:
        return parse_config(values)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
