{#
  The change metadata every current-state staging model carries after its own
  columns, in one place so that the models keep the same names, types and order:
  downstream models and the models' own merge (_ordering_value) rely on them, and a
  difference in type would stop the next incremental run (macros/materializations/schema_changes.sql).
  Timestamps are cast to type_timestamp() because Athena's Iceberg tables store
  microseconds only. Deletes are never null, so that filters on them need no coalesce.
#}
{% macro _change_metadata() %}
  {{ return([
      ('last_event_name', '_event_name'),
      ('is_deleted', 'coalesce(_is_deleted, false)'),
      ('is_ttl_delete', 'coalesce(_is_ttl_delete, false)'),
      ('_event_ts', 'cast(_event_ts as ' ~ type_timestamp() ~ ')'),
      ('_ordering_value', '_ordering_value'),
      ('_event_id', '_event_id'),
      ('_ingested_at', 'cast(_ingested_at as ' ~ type_timestamp() ~ ')'),
      ('_batch_id', '_batch_id'),
  ]) }}
{% endmacro %}

{# The metadata columns derived from a raw change row (no trailing comma). #}
{% macro change_metadata_columns() %}
  {%- for name, expression in _change_metadata() -%}
    {{ expression if expression == name else expression ~ ' as ' ~ name }}{{ ',\n        ' if not loop.last }}
  {%- endfor -%}
{% endmacro %}

{# The metadata columns as already derived by change_metadata_columns, read from
   relation_alias (no trailing comma). #}
{% macro change_metadata_columns_of(relation_alias) %}
  {%- for name, expression in _change_metadata() -%}
    {{ relation_alias }}.{{ name }}{{ ',\n    ' if not loop.last }}
  {%- endfor -%}
{% endmacro %}
