"""Each format of the registry against the RawFormat protocol (streaming/io/formats/raw_format.py):
every member the protocol declares, and the start-up checks a runner asks of a format
before it writes, without a JVM."""
from __future__ import annotations

import pytest

import streaming.io.formats.hudi.sink
from streaming.io.formats.raw_format import JobSinkSettings, MissingFormatJars, RawFormat
from streaming.io.formats.registry import FORMATS

PROTOCOL_MEMBERS = sorted(name for name in dir(RawFormat) if not name.startswith("_"))
HUDI, PARQUET = FORMATS["hudi"], FORMATS["parquet"]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_has_every_member_of_the_protocol(name: str) -> None:
    assert {"jars", "job_sink", "require_jars", "sink", "dbt_inputs"} <= set(PROTOCOL_MEMBERS)
    assert [member for member in PROTOCOL_MEMBERS if not hasattr(FORMATS[name], member)] == []


def test_a_missing_hudi_bundle_is_named_with_the_runners_way_to_add_it(monkeypatch) -> None:
    monkeypatch.setattr(streaming.io.formats.hudi.sink, "hudi_bundle_available", lambda spark: False)

    with pytest.raises(MissingFormatJars) as local:
        HUDI.require_jars(None)  # type: ignore[arg-type]
    with pytest.raises(MissingFormatJars) as on_glue:
        HUDI.require_jars(None, glue_job=True)  # type: ignore[arg-type]

    assert "make venv" in str(local.value) and "--datalake-formats" not in str(local.value)
    assert str(on_glue.value).endswith("add the job parameter --datalake-formats hudi")
    # The local start-up turns a RuntimeError from a sink it cannot build into its own
    # refusal (startup.local_sinks); the CLI prints an OperatorError's message alone.
    assert isinstance(local.value, RuntimeError)


def test_parquet_needs_no_jar_and_is_not_the_aws_jobs_sink() -> None:
    # Spark writes Parquet itself: nothing to check, not even a session.
    PARQUET.require_jars(None)  # type: ignore[arg-type]
    PARQUET.require_jars(None, glue_job=True)  # type: ignore[arg-type]
    # The job syncs each commit to the Glue Data Catalog; a change log of batch folders has none.
    settings = JobSinkSettings("s3://lake/raw", "raw", "hms", 24, 100)
    with pytest.raises(RuntimeError, match="s3://lake/raw would get a Parquet change log, which keeps no commits"):
        PARQUET.job_sink(None, settings, {}, "stream-7")  # type: ignore[arg-type]
