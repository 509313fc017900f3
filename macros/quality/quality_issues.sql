{#
  Rows that break a business rule are kept, built through every model and flagged;
  only structural tests (keys, uniqueness, the relationships the joins rely on, event
  names) stop a build (docs/dbt.md, "Which tests stop a build"). The flag is the column
  quality_issues: the codes of the rules the row breaks, comma-separated in the order
  the rules are listed below, or null when it breaks none, so analysts filter with
  `quality_issues is null` (rows fit for every use) or `quality_issues like
  '%currency_missing%'`. A text rather than an array: the same SQL and the same
  filters on DuckDB and Athena.

  The rules of each table are listed once, here; the business-rule data tests in the
  models' YAML (severity warn) check the same rules, so each warning in a build names
  the rule and the flagged rows carry its code.
#}

{# The quality_issues value from `issues`, SQL texts each giving one code, a list of
   codes or null (issue_if, or a quality_issues column). concat_ws skips nulls on both
   engines (https://trino.io/docs/current/functions/string.html, concat_ws). #}
{% macro quality_issues(issues) -%}
  nullif(concat_ws(',', {{ issues | join(', ') }}), '')
{%- endmacro %}

{# The code when the condition holds, else null. #}
{% macro issue_if(code, condition) -%}
  case when {{ condition }} then '{{ code }}' end
{%- endmacro %}

{#
  Contract-driven: `<column>_invalid` for each column the table contract gives a
  `cast:` (macros/contracts/) whose value was sent but does not fit the cast, so
  typed_by_contract made it null (the model's is_<column>_valid is false). `relation`
  holds the typed column and its text as received, `<column>_text`; `list_column`
  names a list of maps whose item fields are checked (line_items), none for the
  table's own columns, where a field inside a map (`info.rating`) is typed in a column
  of its own, `info__rating` (the scaffolded staging models). A cast added to a
  contract adds its code.
#}
{% macro contract_cast_issues(raw_table, relation=none, list_column=none) %}
  {%- set path_prefix = list_column ~ '[].' if list_column else '' -%}
  {%- set issues = [] -%}
  {%- for path in contract_casts().get(raw_table, {}) if path.startswith(path_prefix) -%}
    {%- set column = path[path_prefix | length:] if list_column else path | replace('.', '__') -%}
    {%- if '.' not in column and '[' not in column -%}
      {%- set typed = _column_of(relation, column) -%}
      {%- do issues.append(issue_if(column ~ '_invalid', typed ~ ' is null and ' ~ typed ~ '_text is not null')) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(issues) }}
{% endmacro %}

{# `column` of `relation` (none: unqualified, for a select from one relation). #}
{% macro _column_of(relation, column) %}
  {{ return((relation ~ '.' if relation else '') ~ column) }}
{% endmacro %}

{# ISO-4217 alphabetic code: three upper-case letters (null for a null text). #}
{% macro is_iso_currency_code(expr) -%}
  {{ regex_matches(expr, '^[A-Z]{3}$') }}
{%- endmacro %}

{#
  An order (stg_dynamodb__orders, carried to fct_orders). `status_codes`: the relation
  of seed order_statuses left-joined on the order's status, so the known codes are the
  seed's, not a second list.
#}
{% macro order_quality_issues(order, status_codes) -%}
  {{ quality_issues(contract_cast_issues('orders', order) + [
      issue_if('amount_negative', _column_of(order, 'amount') ~ ' < 0'),
      issue_if('currency_missing', _column_of(order, 'currency') ~ ' is null'),
      issue_if('currency_invalid', 'not ' ~ is_iso_currency_code(_column_of(order, 'currency'))),
      issue_if('status_missing', _column_of(order, 'status') ~ ' is null'),
      issue_if('status_unknown', _column_of(order, 'status') ~ ' is not null and ' ~ status_codes ~ '.code is null'),
  ]) }}
{%- endmacro %}

{# A line item (int_orders__lines_unnested; fct_order_lines adds its order's issues). #}
{% macro order_line_quality_issues(line=none) -%}
  {{ quality_issues(contract_cast_issues('orders', line, 'line_items') + [
      issue_if('quantity_negative', _column_of(line, 'quantity') ~ ' < 0'),
      issue_if('unit_price_negative', _column_of(line, 'unit_price') ~ ' < 0'),
  ]) }}
{%- endmacro %}

{# A customer (stg_dynamodb__customers, carried to dim_customers) or a version of one
   (dim_customers_history): e-mail missing or not an address (is_email_valid false). #}
{% macro customer_quality_issues(customer=none) -%}
  {{ quality_issues(contract_cast_issues('customers', customer) + [
      issue_if('email_invalid', 'not ' ~ is_valid_email(_column_of(customer, 'email'))),
  ]) }}
{%- endmacro %}
