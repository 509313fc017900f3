{#
  Typed columns as the table contracts say (`cast:` in streaming/contracts/*.yml, read
  through the generated macro contract_casts()). `path` names the raw column as in
  contract_casts.sql; `expr` is the SQL reaching it (default: the column itself).
  Each cast is exact or null, never rounded (macros/cross_db/exact_numbers.sql).
#}
{% macro typed_by_contract(raw_table, path, expr=none) %}
  {%- set cast = contract_cast(raw_table, path) -%}
  {%- set text = expr if expr is not none else path -%}
  {%- if cast.type == 'decimal' -%}
    {{ return(exact_decimal(text, cast.precision, cast.scale)) }}
  {%- elif cast.type == 'bigint' -%}
    {{ return(exact_bigint(text)) }}
  {%- elif cast.type == 'timestamp' -%}
    {{ return(parse_iso_timestamp(text)) }}
  {%- elif cast.type == 'date' -%}
    {{ return(parse_iso_date(text)) }}
  {%- endif -%}
  {{ exceptions.raise_compiler_error("typed_by_contract: no SQL for cast " ~ cast.cast ~ " of " ~ raw_table ~ "." ~ path) }}
{% endmacro %}

{# The SQL type typed_by_contract produces, for columns spelled out by type. #}
{% macro contract_sql_type(raw_table, path) %}
  {%- set cast = contract_cast(raw_table, path) -%}
  {%- if cast.type == 'decimal' -%}
    {{ return('decimal(' ~ cast.precision ~ ', ' ~ cast.scale ~ ')') }}
  {%- elif cast.type == 'timestamp' -%}
    {{ return(type_timestamp()) }}
  {%- else -%}
    {{ return(cast.type) }}
  {%- endif -%}
{% endmacro %}

{# The cast of one column, or a compile error naming what the contracts lack. #}
{% macro contract_cast(raw_table, path) %}
  {%- set table_casts = contract_casts().get(raw_table) -%}
  {%- if table_casts is none -%}
    {{ exceptions.raise_compiler_error("no table contract has raw_table " ~ raw_table ~ " (streaming/contracts/*.yml; regenerate with python -m streaming.operations.contract_casts)") }}
  {%- endif -%}
  {%- if path not in table_casts -%}
    {{ exceptions.raise_compiler_error("the contract of " ~ raw_table ~ " declares no cast for " ~ path ~ "; it has " ~ (table_casts.keys() | list | sort | join(', '))) }}
  {%- endif -%}
  {{ return(table_casts[path]) }}
{% endmacro %}

{# ISO-8601 calendar date text (yyyy-mm-dd) -> date; null otherwise. #}
{% macro parse_iso_date(expr) -%}
  case when {{ regex_matches(expr, '^[0-9]{4}-[0-9]{2}-[0-9]{2}$') }} then try_cast({{ expr }} as date) end
{%- endmacro %}
