"""Helpers that run inside dbt's own process or image, and so import nothing of `streaming`:
the PII key and its HMAC (pii_key), the dbt-duckdb plugin that binds it (duckdb_pii_key),
its publisher for Athena (athena_pii_key, run by the dbt image before each build), and the
local raw-from-Hudi loader (hudi_raw). The environment variables dbt reads are named in env.

Running dbt from the `lakehouse` command lives in streaming.runtime.dbt_runner.
"""
