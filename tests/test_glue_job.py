"""Glue job parameters and Kinesis source options, without awsglue."""
from __future__ import annotations

import pytest

from streaming.glue_job import (
    OPTIONAL_ARGS,
    REQUIRED_ARGS,
    JobArgumentError,
    job_settings,
    kinesis_source_options,
    resolvable_args,
)

STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/ddb-cdc"
REQUIRED = {
    "JOB_NAME": "ddb-cdc-to-raw",
    "stream_arn": STREAM_ARN,
    "raw_base_path": "s3://lake/raw",
    "database": "raw",
    "quarantine_root": "s3://lake/ops",
    "checkpoint_location": "s3://lake/checkpoints/ddb-cdc-to-raw/",
}


def argv_of(values: dict[str, str]) -> list[str]:
    argv = ["script.py"]
    for name, value in values.items():
        argv += [f"--{name}", value]
    return argv


def test_optional_args_are_resolved_only_when_given():
    bare = resolvable_args(argv_of(REQUIRED))
    assert bare == list(REQUIRED_ARGS)
    given = resolvable_args(argv_of({**REQUIRED, "window_size": "60 seconds"}) + ["--sync_mode=glue"])
    assert set(given) == {*REQUIRED_ARGS, "window_size", "sync_mode"}
    assert "starting_position" not in given and "contracts_path" not in given


def test_defaults():
    settings = job_settings(REQUIRED)
    assert settings.window_size == "100 seconds"
    assert settings.starting_position == "trim_horizon"
    assert settings.sync_mode == "hms"
    assert settings.contracts_path is None
    assert settings.stream_arn == STREAM_ARN
    assert settings.checkpoint_location == REQUIRED["checkpoint_location"]
    assert set(OPTIONAL_ARGS) == {"starting_position", "window_size", "contracts_path", "sync_mode"}


def test_explicit_values():
    settings = job_settings(
        {**REQUIRED, "starting_position": "LATEST", "window_size": "2 minutes", "contracts_path": "contracts",
         "sync_mode": "none"}
    )
    assert settings.starting_position == "latest"
    assert settings.window_size == "2 minutes"
    assert settings.contracts_path == "contracts"
    assert settings.sync_mode == "none"
    timestamp = job_settings({**REQUIRED, "starting_position": "2026-04-04T08:00:00-04:00"})
    assert timestamp.starting_position == "2026-04-04T08:00:00-04:00"


def test_missing_required_parameters_are_named():
    incomplete = {name: value for name, value in REQUIRED.items() if name not in ("database", "stream_arn")}
    with pytest.raises(JobArgumentError, match="--stream_arn, --database"):
        job_settings(incomplete)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("stream_arn", "arn:aws:dynamodb:eu-west-1:123456789012:table/customers", "Kinesis data stream ARN"),
        ("starting_position", "yesterday", "starting_position"),
        ("window_size", "100", "window_size"),
        ("sync_mode", "jdbc", "sync_mode"),
        ("raw_base_path", "/tmp/raw", "s3://"),
        ("checkpoint_location", "file:///tmp/cp", "s3://"),
    ],
)
def test_malformed_parameters(name, value, message):
    with pytest.raises(JobArgumentError, match=message):
        job_settings({**REQUIRED, name: value})


def test_kinesis_source_options():
    options = kinesis_source_options(job_settings({**REQUIRED, "starting_position": "earliest"}))
    assert options == {
        "streamARN": STREAM_ARN,
        "startingPosition": "earliest",
        "classification": "json",
        "inferSchema": "true",
        "addRecordTimestamp": "true",
        "emitConsumerLagMetrics": "true",
    }


def test_module_imports_without_awsglue():
    import importlib.util

    assert importlib.util.find_spec("awsglue") is None
    with pytest.raises(ModuleNotFoundError, match="awsglue"):
        from streaming.glue_job import main

        main(argv_of(REQUIRED))
