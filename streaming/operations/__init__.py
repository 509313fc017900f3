"""Layer 6, what an operator runs, beside the stream and never inside it: the stream
command itself (stream.py), status, the demo and sample landing files (demo.py),
reconcile, the quarantine's summary and show, the dbt docs site and marts summary, and the
generators of the contract-driven dbt macros; in batches/, the batches written beside the
stream (backfill, the quarantine and unrouted replays) and reprocess and switch. Each
module's entry function is what one `lakehouse` command calls (streaming/cli/); errors
are OperatorError subclasses."""
