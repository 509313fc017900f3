"""Operations on the raw layer, apart from the stream core: backfill from a DynamoDB
export, reprocess into a new data directory, reconcile raw with DynamoDB, and the
sample-data generator. Each is run from the `lakehouse` command (streaming/cli.py)."""
