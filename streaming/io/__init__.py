"""Layer 3, everything that reads or writes storage: the data-directory layout (layout.py,
the one owner of its paths, pointer, environment names and query name), landing files
(sources, landing_reader, landing_ledger), the sinks (sinks; formats/, one folder per raw format),
Hadoop FileSystem access (storage), CloudWatch metrics, and DynamoDB export reading."""
