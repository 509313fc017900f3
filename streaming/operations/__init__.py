"""Layer 6, what an operator runs, beside the stream and never inside it: the stream
command itself (stream.py), status, the demo and sample landing files (demo.py),
backfill from a DynamoDB export, reprocess and switch, reconcile, the quarantine's
summary, show and replay, the dbt docs site and marts summary, and the generators of
the contract-driven dbt macros. Each module's entry function is what one `lakehouse`
command calls (streaming/cli/); errors are OperatorError subclasses."""
