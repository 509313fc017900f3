{# Whole hours elapsed from start to end (complete hours, truncated), the same on both
   engines: Trino's date_diff counts complete units (trinodb/trino core/trino-main/src/
   main/java/io/trino/operator/scalar/timestamp/DateDiff.java), while DuckDB's date_diff
   counts unit boundaries crossed and its date_sub counts complete units
   (duckdb.org/docs/stable/sql/functions/timestamp). #}
{% macro hours_between(start, end) %}
  {{ return(adapter.dispatch('hours_between', 'dynamodb_lakehouse')(start, end)) }}
{% endmacro %}
{% macro default__hours_between(start, end) -%}
  date_sub('hour', {{ start }}, {{ end }})
{%- endmacro %}
{% macro athena__hours_between(start, end) -%}
  date_diff('hour', {{ start }}, {{ end }})
{%- endmacro %}
