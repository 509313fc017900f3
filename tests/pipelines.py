"""The pipeline the Spark tests run batches through: the local Parquet sink and the
quarantine under one folder, with a fixed clock so that `_ingested_at` and the ingest-hour
folders are known in advance."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from streaming.contracts.model import TableContract
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.pipeline.batch import Pipeline


def pipeline_at(root: Path, contracts: Mapping[str, TableContract], now: datetime) -> Pipeline:
    return Pipeline(contracts, LocalParquetSink(str(root)), QuarantineWriter(str(root)), clock=lambda: now)
