"""Layer 3, everything that reads or writes storage: the data-directory layout (layout.py,
the one owner of its paths, pointer, environment names and query name), landing files
(sources, landing_reader, landing_ledger), the raw formats (formats/, one folder each,
and sinks.py, which picks a local run's), batch folders and the quarantine's writer,
Hadoop FileSystem access (storage), CloudWatch metrics, and DynamoDB export reading."""
