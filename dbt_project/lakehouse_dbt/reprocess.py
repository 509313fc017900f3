"""dbt arguments for reprocessing a range of event days in one command."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from typing import Any


def reprocess_args(start: date, end: date, extra_vars: Mapping[str, Any] | None = None) -> list[str]:
    """Arguments that make `dbt build`/`dbt run` redo the event days [start, end): the
    current-state staging merges through vars reprocess_from/reprocess_to, the
    microbatch marts through --event-time-start/--event-time-end. dbt keeps only the
    last --vars, so other vars of the run go in `extra_vars`."""
    if start >= end:
        raise ValueError(f"reprocess range is empty: {start} .. {end} (end exclusive)")
    dbt_vars = {**(extra_vars or {}), "reprocess_from": start.isoformat(), "reprocess_to": end.isoformat()}
    return [
        "--vars", json.dumps(dbt_vars),
        "--event-time-start", start.isoformat(),
        "--event-time-end", end.isoformat(),
    ]
