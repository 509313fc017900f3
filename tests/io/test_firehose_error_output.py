"""Firehose's error output under the landing folder: recognised, not read, reported."""
from __future__ import annotations

import json

import pytest

from streaming.io.firehose_error_output import error_output_warnings, is_error_output
from streaming.io.layout import DataLayout
from streaming.io.sources import local_landing_files
from streaming.operations.status import status

FIREHOSE_NAME = "ddb-cdc-1-2026-11-23-10-00-00-5d1e2f3a-0b1c-4d2e-9f3a-4b5c6d7e8f90"
# One failed record as Firehose writes it (record-format-conversion-error-handling.html).
ERROR_DOCUMENT = json.dumps({"attemptsMade": 1, "arrivalTimestamp": 1_795_000_000_000, "errorCode": "Lambda.Unhandled",
                             "errorMessage": "boom", "attemptEndingTimestamp": 1_795_000_001_000,
                             "rawData": "eyJldmVudElEIjoiMSJ9"}).encode()


@pytest.mark.parametrize("path", [
    # No ErrorOutputPrefix, Prefix `landing/`: `<Prefix><error-output-type>/yyyy/MM/dd/HH/`.
    f"file:/data/landing/processing-failed/2026/11/23/10/{FIREHOSE_NAME}",
    # `errors/!{firehose:error-output-type}/...`, and Hive style `result=!{...}`.
    f"s3://bucket/landing/errors/format-conversion-failed/2026/11/23/{FIREHOSE_NAME}.gz",
    f"s3://bucket/landing/result=splunk-failed/2026/11/23/{FIREHOSE_NAME}",
    # An ErrorOutputPrefix ending in the expression, without a slash, glues it to the name.
    f"/data/landing/errors/2026/11/23/10/elasticsearch-failed{FIREHOSE_NAME}",
    f"/data/landing/decompression-failed/2026/11/23/10/{FIREHOSE_NAME}",
])
def test_firehose_error_output_paths_are_recognised(path):
    assert is_error_output(path)


@pytest.mark.parametrize("path", [
    f"file:/data/landing/2026/11/23/10/{FIREHOSE_NAME}",
    "file:/data/landing/2026/11/23/10/x-processing-failed",
    "/data/landing/2026/11/23/10/notes-about-splunk-failed",
])
def test_change_records_are_not_taken_for_error_output(path):
    assert not is_error_output(path)


def landing_with_error_output(landing):
    good = landing / "2026" / "11" / "23" / "10" / FIREHOSE_NAME
    failed = [landing / "processing-failed" / "2026" / "11" / "23" / "10" / f"{FIREHOSE_NAME}-{n}" for n in range(3)]
    converted = landing / "errors" / "result=format-conversion-failed" / FIREHOSE_NAME
    for path in (good, *failed, converted):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(ERROR_DOCUMENT if path != good else b'{"eventID":"1"}')
    return good


def test_the_local_listing_skips_error_output_and_names_each_folder_once(tmp_path):
    landing = tmp_path / "landing"
    good = landing_with_error_output(landing)

    assert local_landing_files(landing) == [good]
    warnings = error_output_warnings(landing)
    assert [warning.split(":")[0] for warning in warnings] == [
        str(landing / "errors" / "result=format-conversion-failed"), str(landing / "processing-failed")]
    assert "1 Firehose error-output object(s) not read" in warnings[0]
    assert "3 Firehose error-output object(s) not read" in warnings[1] and "rawData" in warnings[1]
    assert error_output_warnings(tmp_path / "absent") == []


def test_status_warns_about_firehose_error_output_in_the_landing_folder(tmp_path):
    layout = DataLayout(tmp_path / "data")
    landing_with_error_output(layout.landing)

    warnings = [line for line in status(layout).lines() if line.startswith("WARNING")]

    assert [line.split(":")[1].strip() for line in warnings] == [
        str(layout.landing / "errors" / "result=format-conversion-failed"), str(layout.landing / "processing-failed")]
