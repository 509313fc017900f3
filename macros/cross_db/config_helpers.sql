{# Iceberg partition transforms for Athena; DuckDB tables are not partitioned. Keep
   the partition count of one write under Athena's 100-partition limit (month, bucket). #}
{% macro athena_partitioning(transforms) %}
  {{ return(transforms if target.type == 'athena' else none) }}
{% endmacro %}

{# A config value only Athena gets: dbt-athena runs microbatch on Iceberg as a merge on
   unique_key, while dbt-duckdb's microbatch (delete + insert of the batch) refuses one. #}
{% macro athena_only(value) %}
  {{ return(value if target.type == 'athena' else none) }}
{% endmacro %}

{# PII in the marts: hash (salted SHA-256), mask (first character + ***) or clear. #}
{% macro protect_pii(expr) %}
  {%- set mode = var('pii_mode') -%}
  {%- if mode == 'hash' -%}
    case when {{ expr }} is not null then {{ sha256_hex("'" ~ var('pii_hash_salt') ~ "' || " ~ expr) }} end
  {%- elif mode == 'mask' -%}
    case when {{ expr }} is not null then substr({{ expr }}, 1, 1) || '***' end
  {%- elif mode == 'clear' -%}
    {{ expr }}
  {%- else -%}
    {{ exceptions.raise_compiler_error("var pii_mode must be hash, mask or clear, got: " ~ mode) }}
  {%- endif -%}
{% endmacro %}
