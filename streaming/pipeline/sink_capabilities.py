"""What a raw sink lets the pipeline do, declared as data by its raw format
(streaming/io/formats/): the pipeline and the one-off batches ask these, never the sink's
class. No Spark here, so a format declares its capabilities without a session."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SinkCapabilities:
    reads_changes_once: bool = False
    """Each table's changes are read in one pass, so the pipeline leaves them uncached;
    otherwise they are cached for the sink's several reads (Pipeline.process_batch)."""
    writes_tables_concurrently: bool = False
    """Writes of different tables may run at once (in threads, as concurrent Spark jobs)."""
    stages_tables: bool = False
    """The sink is a StagingSink (pipeline/batch.py): a table's rows are written out of
    sight and renamed into place, so a batch is checked before anything of it is visible,
    and a backfill can be written in a folder of its own and renamed in."""
