"""What a stream's trigger may say: its kind and its processing-time interval.

Kept apart from stream_loop.py, which needs Spark, because the Glue job's parameter
defaults (read by the CDK app) and the CLI's argument checks use these without it.
"""
from __future__ import annotations

import re
from typing import Literal

Trigger = Literal["available-now", "processing-time"]
DEFAULT_INTERVAL = "100 seconds"
# What a processing-time interval may say: whole numbers of these units, e.g. "30 seconds",
# "1 minute 30 seconds". Spark parses the same text with its interval syntax and refuses
# months and years for a trigger; tests/cli/test_cli_ops.py checks each case against Spark.
_INTERVAL_UNITS = ("week", "day", "hour", "minute", "second", "millisecond", "microsecond")
_INTERVAL_PART = r"\d+\s+(?:%s)s?" % "|".join(_INTERVAL_UNITS)
_INTERVAL = re.compile(rf"(?:interval\s+)?{_INTERVAL_PART}(?:\s+{_INTERVAL_PART})*", re.IGNORECASE)


def checked_interval(text: str) -> str:
    """`text` unchanged when it is a trigger interval Spark accepts; ValueError otherwise,
    so a typo fails on the command line instead of after Spark has started."""
    if not _INTERVAL.fullmatch(text.strip()):
        raise ValueError(
            f"not a trigger interval: {text!r}; write whole numbers with units, e.g. '30 seconds' or '2 minutes'"
        )
    return text.strip()
