{#
  A join clause that turns each element of an array of structs into a row, exposing
  `<alias>.<field>` for every struct field and `<alias>.<ordinality>` (1-based).
  Rows whose array is null or empty produce no output rows.
#}
{% macro unnest_struct_array(array_expr, alias, fields, ordinality) %}
  {{ return(adapter.dispatch('unnest_struct_array', 'dynamodb_lakehouse')(array_expr, alias, fields, ordinality)) }}
{% endmacro %}

{% macro default__unnest_struct_array(array_expr, alias, fields, ordinality) -%}
  cross join lateral (
    select
      {%- for field in fields %}
      element.item.{{ field }} as {{ field }},
      {%- endfor %}
      element.position as {{ ordinality }}
    from unnest({{ array_expr }}) with ordinality as element (item, position)
  ) as {{ alias }}
{%- endmacro %}

{# Trino expands a row-typed element into one column per field. #}
{% macro athena__unnest_struct_array(array_expr, alias, fields, ordinality) -%}
  cross join unnest({{ array_expr }}) with ordinality as {{ alias }} ({{ fields | join(', ') }}, {{ ordinality }})
{%- endmacro %}
