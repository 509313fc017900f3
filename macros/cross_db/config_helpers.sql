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
