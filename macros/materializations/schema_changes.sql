{#
  What an incremental run does when a model's columns changed since its table was built
  (every incremental model here has on_schema_change='append_new_columns').

  The stream only ever adds to a raw table (streaming/contracts/evolution.py): a new
  attribute, or a new field inside a map, also inside a list's items. A contract
  scaffolded again then adds a column to its staging models, or a field to a map column's
  type. An incremental run takes both, so that the next `dbt build` after an addition is
  green without a full refresh:
  - a new column: added to the table by dbt's own append_new_columns (dbt-duckdb and
    dbt-athena both implement it, adapters' sync_column_schemas);
  - a map or list column whose type gained a field: on DuckDB the column's type is
    widened in place (ALTER COLUMN ... TYPE casts a struct by field name, the stored rows
    read the new field as null, as raw's rows written before the addition do). Without it
    DuckDB's merge would cast the new values to the stored type and drop the new field
    without a word. Athena's DDL adds top-level columns only
    (https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-alter-table-add-columns.html),
    so there the run stops and names the models to rebuild.
  Any other change (a column's scalar type, after a changed cast; a column gone) stops
  the run as on_schema_change='append_new_columns' did, naming the model and the full refresh that
  rebuilds it (docs/operations.md, "Changes that need a full refresh").

  dbt-core dispatches process_schema_changes ('dbt' namespace) and looks in the root
  project first, so this default__ serves both engines; other on_schema_change values
  keep dbt's own.
#}
{% macro default__process_schema_changes(on_schema_change, source_relation, target_relation) %}
  {%- if on_schema_change != 'append_new_columns' -%}
    {{ return(dbt.default__process_schema_changes(on_schema_change, source_relation, target_relation)) }}
  {%- endif -%}
  {%- set changes = check_for_schema_changes(source_relation, target_relation) -%}
  {%- if changes['schema_changed'] -%}
    {%- set stored_types = {} -%}
    {%- for column in changes['target_columns'] -%}
      {%- do stored_types.update({column.name: column.data_type}) -%}
    {%- endfor -%}
    {%- set widened = [] -%}
    {%- set refused = [] -%}
    {%- for change in changes['new_target_types'] -%}
      {%- set stored = stored_types.get(change['column_name'], '') -%}
      {%- if is_nested_type(stored) and is_nested_type(change['new_type']) -%}
        {%- do widened.append(change) -%}
      {%- else -%}
        {%- do refused.append(change['column_name'] ~ ' changed type (' ~ stored ~ ' -> ' ~ change['new_type'] ~ ')') -%}
      {%- endif -%}
    {%- endfor -%}
    {%- for column in changes['target_not_in_source'] -%}
      {%- do refused.append(column.name ~ ' is no longer selected') -%}
    {%- endfor -%}
    {%- if refused -%}
      {{ schema_change_needs_full_refresh(refused) }}
    {%- endif -%}
    {%- if widened -%}
      {%- do widen_nested_columns(target_relation, widened) -%}
    {%- endif -%}
    {%- do sync_column_schemas(on_schema_change, target_relation, changes) -%}
  {%- endif -%}
  {{ return(changes['source_columns']) }}
{% endmacro %}

{# A map (struct, row) or list (array) type, as DuckDB or Athena name it. #}
{% macro is_nested_type(data_type) %}
  {%- set lowered = (data_type or '') | lower -%}
  {{ return(lowered.startswith('struct') or lowered.startswith('row') or lowered.startswith('array')
            or lowered.startswith('map') or lowered.endswith(']')) }}
{% endmacro %}

{% macro schema_change_needs_full_refresh(reasons) %}
  {{ exceptions.raise_compiler_error(
      "The columns of " ~ this.identifier ~ " changed in a way an incremental run cannot take: "
      ~ (reasons | join('; ')) ~ ". Rebuild it: lakehouse dbt build --full-refresh --select "
      ~ this.identifier ~ "+ (docs/operations.md, \"Changes that need a full refresh\").") }}
{% endmacro %}

{% macro widen_nested_columns(relation, changes) %}
  {{ return(adapter.dispatch('widen_nested_columns', 'dynamodb_lakehouse')(relation, changes)) }}
{% endmacro %}

{% macro default__widen_nested_columns(relation, changes) %}
  {%- set reasons = [] -%}
  {%- for change in changes -%}
    {%- do reasons.append(change['column_name'] ~ ' gained a field inside a map (' ~ change['new_type']
        ~ '), which Athena cannot add to a stored table') -%}
  {%- endfor -%}
  {{ schema_change_needs_full_refresh(reasons) }}
{% endmacro %}

{% macro duckdb__widen_nested_columns(relation, changes) %}
  {%- for change in changes -%}
    {%- call statement('widen_' ~ change['column_name']) -%}
      alter table {{ relation }} alter column {{ adapter.quote(change['column_name']) }} type {{ change['new_type'] }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}
