{#
  Keyed pseudonyms: lower-case hex HMAC-SHA-256 (RFC 2104) of `<label>:<text>` under the
  PII key. Without the key nobody can recompute one from a guessed name or e-mail, and
  the label keeps pseudonyms of different columns apart (an e-mail's pseudonym never
  equals a name's). The key never appears in SQL text (dbt_project/lakehouse_dbt/pii_key.py):
  - DuckDB: variables holding the key's HMAC pad blocks, bound by the dbt-duckdb plugin
    lakehouse_dbt.duckdb_pii_key on each dbt connection; HMAC is two sha256 calls.
  - Athena: Trino's hmac_sha256(binary, key) (https://trino.io/docs/current/functions/binary.html)
    with the key read from a one-row table only the dbt role may read (pii_key_table).
#}
{% macro pseudonymize(expr, label) %}
  {%- if not modules.re.match('^[a-z][a-z0-9_]*$', label) -%}
    {{ exceptions.raise_compiler_error("pseudonymize: label must be a lower-case identifier, got: " ~ label) }}
  {%- endif -%}
  {{ return(adapter.dispatch('pseudonymize', 'dynamodb_lakehouse')(expr, label)) }}
{% endmacro %}

{% macro default__pseudonymize(expr, label) -%}
  sha256(
    getvariable('lakehouse_pii_hmac_outer')
    || unhex(sha256(getvariable('lakehouse_pii_hmac_inner') || encode('{{ label }}:' || {{ expr }})))
  )
{%- endmacro %}

{% macro athena__pseudonymize(expr, label) -%}
  lower(to_hex(hmac_sha256(
    to_utf8('{{ label }}:' || {{ expr }}),
    (select to_utf8(trim(pii_key)) from {{ pii_key_table() }})
  )))
{%- endmacro %}

{# Athena: the one-row table (column pii_key) holding the key; see docs/pii.md, "The key on AWS". #}
{% macro pii_key_table() %}
  {{ return(var('pii_key_table', target.schema ~ '_staging.pii_key')) }}
{% endmacro %}

{#
  A people's surrogate key from key columns: the keyed pseudonym of their composite key
  (macros/keys/composite_key.sql), so it neither repeats a clear value nor can be
  recomputed from one, and ('a|b', 'c') and ('a', 'b|c') give different keys.
#}
{% macro keyed_surrogate_key(columns, label) -%}
  {{ pseudonymize(composite_key(columns), label) }}
{%- endmacro %}

{#
  on-run-start of `dbt run`/`dbt build` (DuckDB): stop before any model
  - when there is no key, instead of writing null pseudonyms;
  - when the key differs from the one the marts were built with (a shell with
    LAKEHOUSE_PII_KEY set, the next without it), or the marts exist with no record of
    their key (built by an older version, with unkeyed hashes): incremental marts would
    mix pseudonyms of two keys, or keep the unkeyed hashes. Table pii_key_fingerprint (in the marts schema) holds a
    keyed hash of a constant, which reveals nothing of the key; --full-refresh
    rebuilds the marts and records the new key's fingerprint.
  Athena: a missing key table fails the first model that reads it (docs/pii.md, "Fail closed").
#}
{% macro require_pii_key() %}
  {%- if execute and flags.WHICH in ('run', 'build') and target.type == 'duckdb' -%}
    {%- set found = run_query("select getvariable('lakehouse_pii_hmac_inner') is not null as has_key") -%}
    {%- if not found.columns[0].values()[0] -%}
      {{ exceptions.raise_compiler_error(
          "No PII key: set env LAKEHOUSE_PII_KEY (at least 32 characters), or run dbt through "
          ~ "`lakehouse dbt ...`, which creates <data>/secrets/pii_key once per data directory. "
          ~ "The marts' pseudonyms are keyed hashes and cannot be built without it.") }}
    {%- endif -%}
    {%- set schema = generate_schema_name('marts', none) | trim -%}
    {%- set fingerprint = pseudonymize("'lakehouse pii key check'", 'pii_key_fingerprint') -%}
    {%- set stored = adapter.get_relation(database=target.database, schema=schema, identifier='pii_key_fingerprint') -%}
    {%- if stored is not none and not flags.FULL_REFRESH -%}
      {%- set same = run_query("select fingerprint = " ~ fingerprint ~ " from " ~ stored) -%}
      {%- if not same.columns[0].values()[0] -%}
        {{ exceptions.raise_compiler_error(
            "The PII key differs from the one the marts were built with: an incremental build "
            ~ "would mix pseudonyms of two keys. Use the previous key (env LAKEHOUSE_PII_KEY or "
            ~ "<data>/secrets/pii_key), or rebuild with `dbt build --full-refresh`.") }}
      {%- endif -%}
    {%- else -%}
      {%- if stored is none and not flags.FULL_REFRESH -%}
        {#- run_query, not list_relations_without_caching: that one opens a transaction the
            hooks after this one would run in, and dbt rolls it back after the hooks. -#}
        {%- set built = run_query(
            "select count(*) from information_schema.tables where table_catalog = '" ~ target.database
            ~ "' and table_schema = '" ~ schema ~ "'") -%}
        {%- if built.columns[0].values()[0] > 0 -%}
          {{ exceptions.raise_compiler_error(
              "The marts hold no record of the PII key they were built with (built before keyed "
              ~ "pseudonyms, or pii_key_fingerprint was dropped): their rows may hold pseudonyms of "
              ~ "another key or unkeyed hashes. Rebuild them once with `dbt build --full-refresh`.") }}
        {%- endif -%}
      {%- endif -%}
      {%- do run_query("create schema if not exists " ~ schema) -%}
      {%- do run_query("create or replace table " ~ schema ~ ".pii_key_fingerprint as select " ~ fingerprint ~ " as fingerprint") -%}
    {%- endif -%}
  {%- endif -%}
{% endmacro %}
