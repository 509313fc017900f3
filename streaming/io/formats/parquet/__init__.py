"""The Parquet change log, the local raw format that needs no Hudi bundle: the format's
readers (format.py) and its sink (sink.py), batch folders renamed into place. What its
sink lets the pipeline do is declared here, where the sink and the format both read it."""
from streaming.pipeline.sink_capabilities import SinkCapabilities

# One Parquet write per table reads the changes once: the pipeline need not cache them.
# Each table's batch is staged in its own scratch folder and renamed into place, so the
# tables are written at once and a batch is published only once its counts are checked.
PARQUET_CAPABILITIES = SinkCapabilities(reads_changes_once=True, writes_tables_concurrently=True, stages_tables=True)
