{#
  A mart column taken from contract attribute column `column` of raw table `table`
  (the column itself or a value derived from it): as it is, unless the contract marks
  the attribute PII (contract_columns.sql here, generated from the contracts) or
  var extra_pii_columns adds it; then protected per var pii_mode. So flagging an
  attribute `pii: true` protects it in every mart without editing SQL (after a
  --full-refresh). A name that is no contract's attribute column fails the compile.
#}
{% macro from_contract(table, column, expr) %}
  {%- set tables = contract_columns() -%}
  {%- if table not in tables or column not in tables[table]['columns'] -%}
    {{ exceptions.raise_compiler_error("from_contract: " ~ table ~ "." ~ column ~ " is not an attribute column of a table contract (streaming/contracts/)") }}
  {%- endif -%}
  {%- if column in tables[table]['pii'] or column in var('extra_pii_columns', {}).get(table, []) -%}
    {{ protect_pii(expr, column) }}
  {%- else -%}
    {{ expr }}
  {%- endif -%}
{% endmacro %}

{# PII in the marts: hash (keyed pseudonym, pseudonymize.sql here) or mask
   (first character + ***). There is no clear mode: analysts' marts never hold clear PII. #}
{% macro protect_pii(expr, label) %}
  {%- set mode = var('pii_mode') -%}
  {%- set text = "cast(" ~ expr ~ " as varchar)" -%}
  {%- if mode == 'hash' -%}
    case when {{ expr }} is not null then {{ pseudonymize(text, label) }} end
  {%- elif mode == 'mask' -%}
    case when {{ expr }} is not null then substr({{ text }}, 1, 1) || '***' end
  {%- else -%}
    {{ exceptions.raise_compiler_error("var pii_mode must be hash or mask, got: " ~ mode) }}
  {%- endif -%}
{% endmacro %}
