"""The environment variables through which the `lakehouse` command hands dbt its data
(profiles.yml and dbt_project.yml read them with env_var). Defined here, beside dbt,
because the dbt image has this package and not `streaming`; streaming.io.layout
re-exports them as part of the data-directory layout."""

# The local data directory: DuckDB file, dbt's target and logs, the PII key file.
DATA_DIR_ENV = "LAKEHOUSE_DATA_DIR"
# The raw folder dbt reads (the active one after `lakehouse switch`).
RAW_DIR_ENV = "LAKEHOUSE_RAW_DIR"
# The PII pseudonym key; production injects it from Secrets Manager.
PII_KEY_ENV = "LAKEHOUSE_PII_KEY"
