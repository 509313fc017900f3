"""The Parquet change log, the local raw format that needs no Hudi bundle: its sink
(sink.py), batch folders renamed into place."""
