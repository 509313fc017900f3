"""DynamoDB change data capture into raw lakehouse tables with PySpark.

The subpackages are layers, each importing only those before it (tests/project/test_layers.py):
contracts (what a table looks like) -> pipeline (pure DataFrame steps, tied by
`batch.Pipeline.process_batch`) -> io (landing files, sinks, the data-directory layout)
-> runtime (Spark, the lock, start-up, the stream loop, the Glue entry point) -> samples
-> operations (what an operator runs) -> cli (the `lakehouse` command).
"""
