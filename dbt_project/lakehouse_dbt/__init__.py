"""dbt helpers of the lakehouse: run dbt in-process, raw fixtures, Hudi raw loading, the PII key.

The names below load on first use, so that a module of this package runs where its
neighbours' dependencies are absent: the dbt image runs `python -m
lakehouse_dbt.athena_pii_key` without DuckDB.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "PROJECT_DIR": "lakehouse_dbt.runner",
    "run_dbt": "lakehouse_dbt.runner",
    "reprocess_args": "lakehouse_dbt.reprocess",
    "summarize_marts": "lakehouse_dbt.summary",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lakehouse_dbt' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
