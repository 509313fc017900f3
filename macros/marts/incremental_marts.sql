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
  depends on the engine (the strategy of macros/materializations/replace_live_rows.sql).
  partitioned_by: Iceberg transforms on Athena (athena_partitioning), none on DuckDB.
  replaced_by: a coarser column (the order of a line) when a run recomputes whole
  groups: on DuckDB the run then deletes every stored row of each group it emits, so
  the model need not look up the stored rows a group lost (emits_each_deleted_row).
#}
{% macro incremental_mart_config(unique_key, partitioned_by=none, replaced_by=none) %}
  {%- do config(
      materialized='incremental',
      unique_key=unique_key,
      replaced_by=replaced_by,
      on_schema_change='append_new_columns',
      partitioned_by=partitioned_by,
      **replace_live_rows_strategy()
  ) -%}
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
  The select items of the rows through which an incremental run of a model with
  replaced_by drops the stored rows a changed group no longer has (an order's lost
  lines, a key's lost versions); each model writes that `union all` branch itself, one
  per engine (emits_each_deleted_row), and selects these items in it.
  columns: the model's columns in output order, as [name, SQL type] pairs.

  On DuckDB, one row per changed group: its key from `groups_alias`, every other
  column a typed null (_ingested_at too, so the row is never inserted); the model's
  replaced_by delete removes all the group's stored rows before the current ones are
  appended.
#}
{% macro deleted_group_columns(columns, group_key, groups_alias) -%}
  {%- set items = [] -%}
  {%- for name, type in columns -%}
    {%- do items.append(groups_alias ~ '.' ~ name if name == group_key else 'cast(null as ' ~ type ~ ') as ' ~ name) -%}
  {%- endfor -%}
  {{ items | join(',\n    ') }}
{%- endmacro %}

{#
  Elsewhere (Athena's MERGE matches on the row key only), each stored row of a changed
  group that is not among its current rows, as stored but with a null _ingested_at,
  for the merge to delete.
#}
{% macro deleted_stored_row_columns(columns, stored_alias) -%}
  {%- set items = [] -%}
  {%- for name, type in columns -%}
    {%- do items.append('cast(null as ' ~ type ~ ') as ' ~ name if name == '_ingested_at' else stored_alias ~ '.' ~ name) -%}
  {%- endfor -%}
  {{ items | join(',\n    ') }}
{%- endmacro %}
