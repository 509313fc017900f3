{#
  Incremental models downstream of the current-state staging models (the orders
  lines, fct_orders, fct_order_lines, dim_customers). Each row of such a model depends
  only on the staged row of its own key (plus static seeds), so a run recomputes only
  the keys whose staged row changed since the model's last build and merges them in.
  The rules, shared so that the models cannot drift apart:

  - Which staged rows a run reads: every staged row ingested after the newest one the
    model holds, minus var raw_lookback_hours (the staging merge itself re-reads that
    window, and a row it replaces can carry an ingestion time inside it). On a
    reprocess run (vars reprocess_from/reprocess_to) also the staged rows whose event
    time is in the range: the staging merge may have replaced them with a replayed
    change that kept its old ingestion time. A full build reads everything.
  - Deletions: a run emits a changed key that no longer has a live row (a tombstone
    in staging, a line an order no longer has) as a row whose _ingested_at is null.
    The run deletes the stored row of such a key and never inserts it; every other
    row replaces the stored one. _ingested_at is therefore never null in the table
    (tested), and its maximum over the live rows is the watermark of the next run: a
    key deleted by the last run only makes that watermark older, so the next run
    reads more, never less.
  - The result equals a full build row for row (tests/dbt/test_dbt_local.py). A
    change to a seed or to a model's SQL needs a --full-refresh, as for any
    incremental model.
#}

{#
  The model config of such a model: rows of unique_key replace the stored ones, and
  the keys the run emits with a null _ingested_at are deleted (see above); how
  depends on the engine. partitioned_by: Iceberg transforms on Athena
  (athena_partitioning), none on DuckDB. replaced_by: a coarser column (the order of a line) when a run recomputes whole
  groups: on DuckDB the run then deletes every stored row of each group it emits, so
  the model need not look up the stored rows a group lost (see
  emits_each_deleted_row below).
#}
{% macro incremental_mart_config(unique_key, partitioned_by=none, replaced_by=none) %}
  {%- do config(
      materialized='incremental',
      unique_key=unique_key,
      replaced_by=replaced_by,
      on_schema_change='fail',
      partitioned_by=partitioned_by,
      **adapter.dispatch('replace_live_rows_strategy', 'dynamodb_lakehouse')()
  ) -%}
{% endmacro %}

{#
  Whether an incremental run of a model with replaced_by must emit every stored row
  a changed group lost (with a null _ingested_at). Athena's MERGE matches on
  unique_key only, so yes. DuckDB's replace_live_rows deletes whole groups, so one
  row per changed group with a null _ingested_at is enough; finding the lost rows
  meant scanning the whole stored table once more (measured on fct_order_lines: its
  incremental run took longer than its full build).
#}
{% macro emits_each_deleted_row() %}
  {{ return(adapter.dispatch('emits_each_deleted_row', 'dynamodb_lakehouse')()) }}
{% endmacro %}

{% macro default__emits_each_deleted_row() %}
  {{ return(true) }}
{% endmacro %}

{% macro duckdb__emits_each_deleted_row() %}
  {{ return(false) }}
{% endmacro %}

{#
  DuckDB: the custom strategy below (dbt looks up get_incremental_<name>_sql). A MERGE
  that updates the matched rows took about three times as long as deleting them and
  appending the new versions, measured on the order lines.
#}
{% macro default__replace_live_rows_strategy() %}
  {{ return({'incremental_strategy': 'replace_live_rows'}) }}
{% endmacro %}

{# dbt-athena 1.11 (Iceberg merge, incremental/merge.sql): its source alias is src. #}
{% macro athena__replace_live_rows_strategy() %}
  {{ return({
      'incremental_strategy': 'merge',
      'delete_condition': 'src._ingested_at is null',
      'insert_condition': 'src._ingested_at is not null',
  }) }}
{% endmacro %}

{#
  The statements of strategy replace_live_rows (dbt-duckdb runs them in the model's
  transaction, so readers see all of it or none): delete the stored row of every key
  the run emits, then append the emitted rows that are live. A single-column key only.
  With config replaced_by, the delete matches on that column instead: every stored
  row of an emitted group goes.
#}
{% macro get_incremental_replace_live_rows_sql(arg_dict) %}
  {%- set unique_key = config.get('replaced_by') or arg_dict['unique_key'] -%}
  {%- if unique_key is not string -%}
    {{ exceptions.raise_compiler_error("strategy replace_live_rows needs a single-column unique_key, got: " ~ unique_key) }}
  {%- endif -%}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set columns = get_quoted_csv(arg_dict['dest_columns'] | map(attribute='name')) -%}
  delete from {{ target }}
  where {{ unique_key }} in (select {{ unique_key }} from {{ source }});

  insert into {{ target }} ({{ columns }})
  select {{ columns }}
  from {{ source }}
  where _ingested_at is not null
{% endmacro %}

{#
  The where clause (or nothing, on a full build) that keeps the staged rows a run of
  the current model reads, per the rules above. Reads the columns _ingested_at and
  _event_ts of the staging model selected from, unqualified.
#}
{% macro staged_changes_since_last_build() %}
  {%- if is_incremental() -%}
    where _ingested_at > {{ lookback_cutoff() }}
    {%- if reprocess_window() is not none %}
        or ({{ in_reprocess_window('_event_ts') }})
    {%- endif %}
  {%- endif -%}
{% endmacro %}

{#
  The _ingested_at of a mart row built from the staged row `staged_alias`: null when
  that row is a tombstone, so that the run deletes the key (see above).
#}
{% macro ingested_at_unless_deleted(staged_alias) -%}
  case when not {{ staged_alias }}.is_deleted then {{ staged_alias }}._ingested_at end
{%- endmacro %}

{#
  The where clause that drops the tombstones `staged_alias` on a full build. An
  incremental run keeps them: their rows, with a null _ingested_at, delete the key.
#}
{% macro live_rows_unless_incremental(staged_alias) %}
  {%- if not is_incremental() -%}
    where not {{ staged_alias }}.is_deleted
  {%- endif -%}
{% endmacro %}

{#
  For a model that reads an upstream incremental mart (built from the same staging
  model, earlier in the same build) for the keys in its changed staged rows: `and`
  plus a condition on that mart's _ingested_at that keeps all those keys' rows, or
  nothing on a full build or a reprocess run. Such a row carries the _ingested_at of
  its key's staged row, and outside a reprocess run every changed staged row was
  ingested after this model's lookback_cutoff(). The key semi-join stays the exact
  filter; this one lets DuckDB skip the row groups written before the cutoff (most of
  the table; 5 of 8 were scanned at 2M raw rows, more skipped as it grows) instead of
  probing every row's key.
  column: the upstream mart's _ingested_at, qualified as the query needs.
#}
{% macro and_ingested_since_last_build(column='_ingested_at') %}
  {%- if is_incremental() and reprocess_window() is none -%}
    and {{ column }} > {{ lookback_cutoff() }}
  {%- endif -%}
{% endmacro %}

{#
  The tail of an incremental model's final select that replaces whole groups of rows
  (an order's lines, a customer's versions): after `select * from <current_rows>`, the
  rows through which the run drops the stored rows a changed group no longer has. On
  DuckDB (emits_each_deleted_row false), one row per changed group with a null
  _ingested_at, never inserted: the model's replaced_by=<group_key> delete removes all
  the group's stored rows before the current ones are appended. Elsewhere (Athena's
  MERGE matches on <row_key> only), each stored row of a changed group that is not
  among its current rows, with a null _ingested_at, for the merge to delete.
  columns: the model's columns in output order, as [name, SQL type] pairs.
  changed_groups / current_rows: the model's CTEs of changed group keys and of the
  groups' recomputed rows.
#}
{% macro rows_lost_by_changed_groups(columns, group_key, changed_groups, row_key, current_rows) %}
  {%- if is_incremental() and not emits_each_deleted_row() %}
union all
select
    {%- for name, type in columns %}
    {% if name == group_key %}{{ changed_groups }}.{{ group_key }}{% else %}cast(null as {{ type }}) as {{ name }}{% endif %}
    {{- ',' if not loop.last }}
    {%- endfor %}
from {{ changed_groups }}
  {%- elif is_incremental() %}
union all
select
    {%- for name, type in columns %}
    {% if name == '_ingested_at' %}cast(null as {{ type }}) as _ingested_at{% else %}stored.{{ name }}{% endif %}
    {{- ',' if not loop.last }}
    {%- endfor %}
from {{ this }} as stored
inner join {{ changed_groups }}
    on stored.{{ group_key }} = {{ changed_groups }}.{{ group_key }}
left join {{ current_rows }}
    on stored.{{ row_key }} = {{ current_rows }}.{{ row_key }}
where {{ current_rows }}.{{ row_key }} is null
  {%- endif %}
{% endmacro %}
