"""Layer 4, running things: the Spark session, the data directory's single-writer lock,
the stream identity, the stream loop, start-up (startup.start_stream: the one path that
`lakehouse stream`, `lakehouse reprocess`, the benchmarks and the Glue job start their
stream through), the Glue entry point, and dbt in-process."""
