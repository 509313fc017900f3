"""The raw formats, one folder each (hudi/, parquet/): a format's sink, its options and its
readers. The rest of the project reaches a format only through raw_format.py's RawFormat
and registry.py's FORMATS (tests/project/test_format_rooms.py holds it to that)."""
