"""Hudi, the production raw format: the format's readers (format.py), the sink (sink.py),
its write options (options.py) and its timeline read as files (timeline.py). What its
sink lets the pipeline do is declared here, where the sink and the format both read it."""
from streaming.pipeline.sink_capabilities import SinkCapabilities

# Two raw tables' commits at once: each table has its own timeline and write client, and
# a commit is mostly the driver waiting on small Spark jobs, so two in flight keep both
# cores busy (docs/performance.md); a table's own two commits stay in order. The changes
# are read twice (change log, winners per key), so the pipeline caches them; a write is
# its commit, so nothing can be staged out of sight.
HUDI_CAPABILITIES = SinkCapabilities(writes_tables_concurrently=True)
