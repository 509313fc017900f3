"""The files of a local data directory that dbt's side opens itself: the DuckDB database
and the PII key. Named here, beside dbt, because the dbt image has this package and not
`streaming`; streaming.io.layout, which names every other folder and file of a data
directory, takes them from here."""
from pathlib import Path

# DuckDB names the file's catalog `lakehouse` after it: the `database` of profiles.yml.
DATABASE_FILE = "lakehouse.duckdb"
# Generated once per local data directory (mode 0600), inside a folder of its own.
PII_KEY_FILE = Path("secrets") / "pii_key"
