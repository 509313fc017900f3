"""Which raw sink a local run writes with: the raw format `--sink` names, else the one the
data directory's raw tables are in, else the default (streaming/io/formats/registry.py).

Each sink is a thin adapter with `write(changes, contract, batch_id)`; the frames arrive
already shaped as change-log rows by the pipeline. The sinks live in their formats'
folders (streaming/io/formats/), the batch folders in batch_folders.py and the
quarantine's writer in quarantine_writer.py.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.io import layout as raw_layout
from streaming.io.formats.registry import DEFAULT_FORMAT, FORMAT_NAMES, format_on_disk, raw_format

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink

# The name of a raw format of the registry.
SinkName = str
SINK_NAMES: tuple[SinkName, ...] = FORMAT_NAMES
# The production format is the local default too (DESIGN.md); the others are named explicitly.
DEFAULT_SINK: SinkName = DEFAULT_FORMAT.name


def choose_sink(
    name: SinkName | None,
    spark: SparkSession,
    *,
    data_dir: str,
    contracts: Mapping[str, TableContract],
    database: str = "raw",
    stream_id: str | None = None,
    metastore_uri: str | None = None,
) -> RawSink:
    """The raw sink for a local run: the format `name`; None means the format of the raw
    tables already there, else DEFAULT_SINK.

    Every format's tables go under `<data_dir>/raw/`, so downstream paths do not depend on
    the sink. A data directory whose raw tables are in another format is refused, never
    mixed. `stream_id` names the streaming query (its checkpoint), which a sink with
    commits records with each. With `metastore_uri` (`thrift://host:port`) each table is
    synced to that Hive metastore after each commit as `database`.<table>, the Glue job's
    sync_mode "hms"; without it nothing is synced.
    """
    requested = raw_format(name) if name is not None else None
    on_disk = format_on_disk(Path(data_dir) / raw_layout.RAW_FOLDER)
    chosen = requested or on_disk or DEFAULT_FORMAT
    if on_disk is not None and on_disk is not chosen:
        raise RuntimeError(
            f"the raw tables under {raw_layout.uri(data_dir, raw_layout.RAW_FOLDER)} are {on_disk.name} tables; "
            f"write them with --sink {on_disk.name}, or rebuild them as {chosen.name} with "
            f"`lakehouse reprocess --sink {chosen.name}`"
        )
    return chosen.sink(spark, data_dir=data_dir, contracts=contracts, database=database, stream_id=stream_id,
                       metastore_uri=metastore_uri)
