"""Where the rejected records of every table land, each with its reason."""
from __future__ import annotations

from pyspark.sql import DataFrame

from streaming.io import layout as raw_layout
from streaming.io.batch_folders import replace_batch_folder


class QuarantineWriter:
    """Bad records of every table: `<root>/quarantine/_batch_id=<n>/*.parquet`."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    @property
    def path(self) -> str:
        return raw_layout.uri(self.root, raw_layout.QUARANTINE_FOLDER)

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        replace_batch_folder(df, self.path, batch_id, rows)
