{#
  Target `trino` (the local Trino of `make athena-local`) stands in for Athena, whose
  engine v3 is Trino: each macro the project dispatches takes its Athena form there.
  dbt looks up `trino__<name>` before `default__<name>`, and dbt-trino is no child of
  dbt-athena, so each Athena form is named once more here.
#}
{% macro trino__binary_to_hex(expr) %}{{ return(athena__binary_to_hex(expr)) }}{% endmacro %}
{% macro trino__hours_between(start, end) %}{{ return(athena__hours_between(start, end)) }}{% endmacro %}
{% macro trino__lookback_cutoff() %}{{ return(athena__lookback_cutoff()) }}{% endmacro %}
{% macro trino__parse_iso_timestamp(expr) %}{{ return(athena__parse_iso_timestamp(expr)) }}{% endmacro %}
{% macro trino__pseudonymize(expr, label) %}{{ return(athena__pseudonymize(expr, label)) }}{% endmacro %}
{% macro trino__regex_matches(expr, pattern) %}{{ return(athena__regex_matches(expr, pattern)) }}{% endmacro %}
{% macro trino__regex_replace_all(expr, pattern, replacement) %}{{ return(athena__regex_replace_all(expr, pattern, replacement)) }}{% endmacro %}
{% macro trino__type_timestamp() %}{{ return(athena__type_timestamp()) }}{% endmacro %}
{% macro trino__unnest_struct_array(array_expr, alias, fields, ordinality) %}{{ return(athena__unnest_struct_array(array_expr, alias, fields, ordinality)) }}{% endmacro %}
