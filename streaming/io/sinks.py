"""Which raw sink a local run writes with: Hudi or the local Parquet change log.

Each sink is a thin adapter with `write(changes, contract, batch_id)`; the frames arrive
already shaped as change-log rows by the pipeline. The sinks live in their formats'
folders (streaming/io/formats/), the batch folders in batch_folders.py and the
quarantine's writer in quarantine_writer.py.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pyspark.sql import SparkSession

from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.options import HIVE_METASTORE_URIS_KEY
from streaming.io.hive_metastore import create_database
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.formats.registry import format_on_disk

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink

log = logging.getLogger(__name__)

SinkName = Literal["hudi", "parquet"]
SINK_NAMES: tuple[SinkName, ...] = ("hudi", "parquet")
# The production format is the local default too (DESIGN.md); Parquet is named explicitly.
DEFAULT_SINK: SinkName = "hudi"


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
    """The raw sink for a local run: `hudi` (the production format) or `parquet`; None
    means the format of the raw tables already there, else `hudi`.

    Locally the Hudi tables go under `<data_dir>/raw/`, where the Parquet change log goes,
    so downstream paths do not depend on the sink. A data directory whose raw tables are
    in the other format is refused, never mixed. `stream_id` names the streaming query
    (its checkpoint), which the Hudi sink records with each commit. With `metastore_uri`
    (`thrift://host:port`) Hudi syncs each table to that Hive metastore after each commit
    as `database`.<table>, the Glue job's sync_mode "hms"; without it nothing is synced.
    """
    if name is not None and name not in SINK_NAMES:
        raise ValueError(f"sink must be one of {', '.join(SINK_NAMES)}, not {name!r}")
    found = format_on_disk(Path(data_dir) / raw_layout.RAW_FOLDER)
    on_disk = found.name if found is not None else None
    name = name or on_disk or DEFAULT_SINK
    if on_disk is not None and on_disk != name:
        raise RuntimeError(
            f"the raw tables under {raw_layout.uri(data_dir, raw_layout.RAW_FOLDER)} are {on_disk} tables; "
            f"write them with --sink {on_disk}, or rebuild them as {name} with `lakehouse reprocess --sink {name}`"
        )
    if name == "parquet":
        if metastore_uri:
            raise RuntimeError(f"only Hudi tables are synced to a catalog ({metastore_uri}); the raw tables "
                               f"here are a Parquet change log: stream without --catalog, or rebuild them with "
                               f"`lakehouse reprocess --sink hudi`")
        log.info("sink=parquet change log")
        return LocalParquetSink(data_dir)
    from streaming.io.formats.hudi.sink import HudiSink, hudi_bundle_available

    if not hudi_bundle_available(spark):
        raise RuntimeError(
            "the Hudi sink needs the Hudi Spark bundle (org.apache.hudi.DefaultSource was not found): "
            "`make venv` fetches it (python -m streaming.runtime.jars fetch); on a cluster add it with "
            "--packages or --jars; or write the Parquet change log with --sink parquet"
        )
    log.info("sink=hudi")
    if metastore_uri:
        create_database(spark, metastore_uri, database)
    # Hudi makes a Hadoop URI of its base path, and a relative one ("file:data/raw") is
    # refused; so a local folder such as the default ./data is made absolute.
    root = data_dir if "://" in data_dir else str(Path(data_dir).resolve())
    return HudiSink(raw_layout.uri(root, raw_layout.RAW_FOLDER), database, contracts,
                    sync_mode="hms" if metastore_uri else "none", stream_id=stream_id,
                    extra_options={HIVE_METASTORE_URIS_KEY: metastore_uri} if metastore_uri else None)
