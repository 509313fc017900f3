{# Engine-specific SQL fragments. DuckDB is the local target, Athena (Trino) production. #}

{# Iceberg on Athena stores microseconds and rejects timestamp(3), Athena's default. #}
{% macro type_timestamp() %}
  {{ return(adapter.dispatch('type_timestamp', 'dynamodb_lakehouse')()) }}
{% endmacro %}
{% macro default__type_timestamp() %}timestamp{% endmacro %}
{% macro athena__type_timestamp() %}timestamp(6){% endmacro %}

{# ISO-8601 text -> UTC timestamp without zone; null when unparseable (never an error). #}
{% macro parse_iso_timestamp(expr) %}
  {{ return(adapter.dispatch('parse_iso_timestamp', 'dynamodb_lakehouse')(expr)) }}
{% endmacro %}
{% macro default__parse_iso_timestamp(expr) -%}
  cast(try_cast({{ expr }} as timestamptz) at time zone 'UTC' as timestamp)
{%- endmacro %}
{% macro athena__parse_iso_timestamp(expr) -%}
  cast(try(from_iso8601_timestamp({{ expr }})) at time zone 'UTC' as timestamp(6))
{%- endmacro %}

{# Decimal text -> decimal(p, s), null unless the value fits exactly: both engines
   would round 1.005 to 1.01 on a plain cast, and money is never silently rounded. #}
{% macro exact_decimal(expr, precision, scale) -%}
  case
    when try_cast({{ expr }} as decimal(38, 10)) = try_cast({{ expr }} as decimal({{ precision }}, {{ scale }}))
      then try_cast({{ expr }} as decimal({{ precision }}, {{ scale }}))
  end
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

{# First day of the month of a date or timestamp, as a date. #}
{% macro month_start(expr) -%}
  cast(date_trunc('month', {{ expr }}) as date)
{%- endmacro %}
