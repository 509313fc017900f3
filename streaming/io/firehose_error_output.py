"""Firehose's error output: objects the landing listing passes over, with a warning.

Firehose writes the records it failed to deliver, transform, convert or decompress under
its `ErrorOutputPrefix`, whose `!{firehose:error-output-type}` expands to the kind of
failure; with no `ErrorOutputPrefix`, under `<Prefix><error-output-type>/yyyy/MM/dd/HH/`
(https://docs.aws.amazon.com/firehose/latest/dev/s3-prefixes.html, "Semantic rules").
Either lands beside the change records when the two prefixes share the landing folder.
Such an object holds Firehose's own JSON documents (`attemptsMade`, `errorCode`, the
record base64-encoded in `rawData`), not change records: read as landing data, every one
of them would be quarantined as `no_table_name`. So the listing skips them, and
`lakehouse status` and the stream's start name the folders, because the records in them
never reached the raw tables and need the operator.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

# The values of `!{firehose:error-output-type}` that an S3 destination writes: a failed
# Lambda transformation, a failed OpenSearch (Elasticsearch) or Splunk delivery backed
# up to S3, a failed record format conversion (s3-prefixes.html, "firehose namespace"),
# a failed decompression of CloudWatch Logs records (decomp-faq.html).
ERROR_OUTPUT_TYPES = (
    "processing-failed",
    "elasticsearch-failed",
    "splunk-failed",
    "format-conversion-failed",
    "decompression-failed",
)
# A path part that is one of them, or carries one after `=` (`result=processing-failed`,
# a Hive-style prefix), or starts with one (an ErrorOutputPrefix without a trailing slash
# glues it to the object name). The same pattern serves Python's `re` and Spark's `rlike`.
ERROR_OUTPUT_PATTERN = r"(^|/)([^/]*=)?(" + "|".join(re.escape(kind) for kind in ERROR_OUTPUT_TYPES) + ")"
_ERROR_OUTPUT = re.compile(ERROR_OUTPUT_PATTERN)


def is_error_output(path: str) -> bool:
    """Whether a listed path lies in (or is) Firehose error output."""
    return _ERROR_OUTPUT.search(path) is not None


def _error_output_root(path: Path) -> Path:
    """`path` up to its first part that names error output."""
    for depth in range(1, len(path.parts) + 1):
        if _ERROR_OUTPUT.search("/" + path.parts[depth - 1]):
            return Path(*path.parts[:depth])
    return path


def error_output_warnings(landing: Path) -> list[str]:
    """One warning per error-output folder (or object) below a local landing folder,
    with the number of objects in it that the stream does not read."""
    if not landing.is_dir():
        return []
    skipped = Counter(
        _error_output_root(path.relative_to(landing))
        for path in landing.rglob("*")
        if path.is_file() and is_error_output(str(path))
    )
    return [
        f"{landing / root}: {count} Firehose error-output object(s) not read: records Firehose failed to "
        "deliver, transform, convert or decompress, which never reached the raw tables. Each document's "
        "`rawData` is the record, base64-encoded: decoded into a new landing file, it is read like any other."
        for root, count in sorted(skipped.items())
    ]
