"""The arithmetic behind the reported figures, kept pure so the smoke test can check it."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def rate(events: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {seconds}")
    return events / seconds


def throughput_figures(events: int, job_seconds: float, copy_seconds: dict[str, float]) -> dict[str, Any]:
    """Events/s of the job and of each plain copy, and job/copy ratios (1.0 = as fast as a copy)."""
    job_rate = rate(events, job_seconds)
    copy_rates = {name: rate(events, seconds) for name, seconds in copy_seconds.items()}
    return {
        "events": events,
        "job_seconds": job_seconds,
        "job_events_per_s": job_rate,
        "copy_seconds": dict(copy_seconds),
        "copy_events_per_s": copy_rates,
        "ratio_to_copy": {name: job_rate / copy_rate for name, copy_rate in copy_rates.items()},
    }


def linear_slope(values: Sequence[float]) -> float:
    """Least-squares slope of `values` against their index."""
    count = len(values)
    if count < 2:
        return 0.0
    mean_x = (count - 1) / 2
    mean_y = sum(values) / count
    numerator = sum((index - mean_x) * (value - mean_y) for index, value in enumerate(values))
    denominator = sum((index - mean_x) ** 2 for index in range(count))
    return numerator / denominator


def batch_growth(batch_seconds: Sequence[float], window: int = 10) -> dict[str, Any]:
    """Does a micro-batch get slower as the table grows? Last-`window` mean over first-`window` mean.

    Batch 0 is left out: it pays the JVM's warm-up (class loading, JIT), which would make
    the first window look slow and the ratio look better than it is.
    """
    steady = list(batch_seconds[1:])
    if len(steady) < 2:
        raise ValueError("need at least three micro-batches to compare first and last ones")
    window = max(1, min(window, len(steady) // 2))
    first = sum(steady[:window]) / window
    last = sum(steady[-window:]) / window
    slope = linear_slope(steady)
    return {
        "batches": len(batch_seconds),
        "window": window,
        "first_mean_s": first,
        "last_mean_s": last,
        "last_over_first": last / first,
        "slope_s_per_batch": slope,
        # Relative growth over the whole run implied by the slope.
        "slope_growth_over_run": slope * (len(steady) - 1) / (sum(steady) / len(steady)),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
