"""The operations that write one batch beside the stream, and reprocess, which repeats them.

* recorded_batch.py: what they share: the run log, the batch id, resume, and
  `one_off_batch`, the one entry a one-off batch's command runs;
* backfill.py: `lakehouse backfill`, a DynamoDB export as one batch;
* quarantine_replay.py: `lakehouse quarantine replay`, open quarantined records again;
* unrouted_replay.py: `lakehouse unrouted replay`, unrouted items routed again;
* reprocess.py: `lakehouse reprocess` and `switch`, the raw tables rebuilt in a new
  location (replaying the recorded backfills and quarantine replays there), and readers
  moved to it.
"""
