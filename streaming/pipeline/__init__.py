"""Layer 2, the pure batch logic: decode (envelope -> typed rows or quarantine rows),
ordering (which change wins), and batch.process_batch tying them to a sink. DataFrame in,
DataFrame out; the sinks and metrics it writes to are given to it (protocols in batch.py)."""
