"""The raw formats, one folder each: what a format writes (its sink), its options and
how its tables are read without Spark."""
