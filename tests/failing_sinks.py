"""Sinks that fail on purpose, for the tests of a one-off replay (of the quarantine, of
unrouted items) whose write is interrupted after some of its rows landed."""
from __future__ import annotations

from streaming.pipeline.sink_capabilities import SinkCapabilities


class SinkThatDiesAfterWriting:
    """Writes like the real sink, and fails once it wrote rows: a replay interrupted after
    some of its rows landed."""

    capabilities = SinkCapabilities()

    def __init__(self, sink):
        self.sink = sink

    def write(self, changes, contract, batch_id, rows=None):
        self.sink.write(changes, contract, batch_id, rows)
        if rows:
            raise OSError("connection lost after the write")
