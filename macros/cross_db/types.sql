{# Engine-specific SQL fragments. DuckDB is the local target, Athena (Trino) production. #}

{# Iceberg on Athena stores microseconds and rejects timestamp(3), Athena's default. #}
{% macro type_timestamp() %}
  {{ return(adapter.dispatch('type_timestamp', 'dynamodb_lakehouse')()) }}
{% endmacro %}
{% macro default__type_timestamp() %}timestamp{% endmacro %}
{% macro athena__type_timestamp() %}timestamp(6){% endmacro %}

{# ISO-8601 text -> UTC timestamp without zone, to the microsecond; null when
   unparseable (never an error). Digits beyond the microsecond are cut, as DuckDB's
   parse does. #}
{% macro parse_iso_timestamp(expr) %}
  {{ return(adapter.dispatch('parse_iso_timestamp', 'dynamodb_lakehouse')(expr)) }}
{% endmacro %}
{% macro default__parse_iso_timestamp(expr) -%}
  cast(try_cast({{ expr }} as timestamptz) at time zone 'UTC' as timestamp)
{%- endmacro %}
{# from_iso8601_timestamp keeps milliseconds only (timestamp(3)); the _nanos parse
   keeps every digit (trinodb/trino core/trino-main/src/main/java/io/trino/operator/
   scalar/DateTimeFunctions.java). Its java.time ISO_DATE_TIME grammar needs a time of
   day, so a date alone goes through from_iso8601_timestamp, exact at midnight. The
   fraction is cut to 6 digits first, so the cast to timestamp(6) never rounds. #}
{% macro athena__parse_iso_timestamp(expr) -%}
  cast(
    coalesce(
      try(from_iso8601_timestamp_nanos(regexp_replace({{ expr }}, '([.,][0-9]{6})[0-9]+', '$1'))),
      case when regexp_like({{ expr }}, '^[0-9]{4}-[0-9]{2}-[0-9]{2}$') then try(from_iso8601_timestamp({{ expr }})) end
    ) at time zone 'UTC' as timestamp(6)
  )
{%- endmacro %}

{% macro regex_matches(expr, pattern) %}
  {{ return(adapter.dispatch('regex_matches', 'dynamodb_lakehouse')(expr, pattern)) }}
{% endmacro %}
{% macro default__regex_matches(expr, pattern) -%}
  regexp_matches({{ expr }}, '{{ pattern }}')
{%- endmacro %}
{% macro athena__regex_matches(expr, pattern) -%}
  regexp_like({{ expr }}, '{{ pattern }}')
{%- endmacro %}

{% macro is_valid_email(expr) -%}
  coalesce({{ regex_matches(expr, '^[a-z0-9._%+-]+@[a-z0-9-]+(\\.[a-z0-9-]+)*\\.[a-z]{2,}$') }}, false)
{%- endmacro %}

{% macro binary_to_hex(expr) %}
  {{ return(adapter.dispatch('binary_to_hex', 'dynamodb_lakehouse')(expr)) }}
{% endmacro %}
{% macro default__binary_to_hex(expr) -%}
  lower(hex({{ expr }}))
{%- endmacro %}
{% macro athena__binary_to_hex(expr) -%}
  lower(to_hex({{ expr }}))
{%- endmacro %}
