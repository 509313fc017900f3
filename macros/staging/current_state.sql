{#
  The current-state staging models (one row per DynamoDB key, from the raw change
  log) share one rule set, kept here so that the models cannot drift apart:

  - Which raw rows a run reads. A full build reads all. An incremental run reads the
    rows ingested after the newest processed one, minus var raw_lookback_hours, so a
    batch that landed late is not missed. A reprocess run (vars reprocess_from /
    reprocess_to, see reprocess_window) reads the rows whose _event_ts is in the
    range instead, whenever they were ingested, so a corrected raw batch is re-read.
  - Which change of a key wins: the greatest _ordering_value, whatever the arrival
    order. Ties go to the earliest ingested, then the lowest _event_id, so that the
    result does not depend on how the rows happen to be read.
  - Whether the winner replaces the stored row: only if its ordering value is greater,
    so a late older event never overwrites a newer one; on a reprocess run an equal
    one does too, so a replayed change takes effect.

  Keys are not time-sliced, so these are merges on the key, not microbatch models.
  row_number() is used rather than QUALIFY, which Athena (Trino) does not have.
#}

{#
  The model config these rules rely on, from the same key_columns as the other two
  macros: the rows keep_only_newer_than_existing lets through are merged on exactly
  that key. A schema change stops the run rather than silently dropping or adding a
  column. On Athena, Iceberg buckets on the first key column (DynamoDB's partition
  key) keep a merge's writes under Athena's 100-partition limit. meta
  changed_rows_tests: an incremental build tests only the rows it could have written
  (macros/tests/changed_rows_only.sql).
#}
{% macro current_state_config(key_columns) %}
  {%- do config(
      unique_key=key_columns,
      incremental_strategy='merge',
      on_schema_change='fail',
      partitioned_by=athena_partitioning(['bucket(' ~ key_columns[0] ~ ', 16)']),
      meta={'changed_rows_tests': true}
  ) -%}
{% endmacro %}

{#
  The CTEs `changes`, `ranked` and `latest` (no leading `with`, no trailing comma):
  `latest` holds the winning raw row of each key among those this run reads, with
  all the source columns plus change_rank (always 1).
  source_relation: the raw change log, e.g. source('dynamodb', 'customers_changes').
  key_columns: the DynamoDB key, as a list of column names.
#}
{% macro latest_change_per_key(source_relation, key_columns) %}
changes as (
    select *
    from {{ source_relation }}
    {{ raw_changes_this_run_reads() }}
),

ranked as (
    select
        changes.*,
        row_number() over (
            partition by {% for column in key_columns %}changes.{{ column }}{{ ', ' if not loop.last }}{% endfor %}
            order by changes._ordering_value desc, changes._ingested_at asc, changes._event_id asc
        ) as change_rank
    from changes
),

latest as (
    select * from ranked
    where change_rank = 1
)
{%- endmacro %}

{#
  The where clause (or nothing, on a full build) that keeps the raw changes an
  incremental run reads, by the rule above, from a raw change log selected from
  unqualified: the rows ingested after lookback_cutoff(), or on a reprocess run those
  whose _event_ts is in the range. Shared by every model that reads the change log
  incrementally (the current-state models and stg_dynamodb__customer_changes).
#}
{% macro raw_changes_this_run_reads() %}
  {%- set reprocess = reprocess_window() -%}
  {%- if is_incremental() and reprocess is not none %}
    where {{ in_reprocess_window('_event_ts') }}
  {%- elif is_incremental() %}
    {%- set cutoff = lookback_cutoff() %}
    where _ingested_at > {{ cutoff }}
        -- The partition of the cutoff's hour and later: the rows above lie only there,
        -- and a reader prunes the older partitions instead of scanning the whole log.
        and _ingest_hour >= {{ ingest_hour_of(cutoff) }}
  {%- endif %}
{%- endmacro %}

{#
  The tail of the model's final select, after `from <candidates>`: on an incremental
  run, drops each candidate row that must not replace the stored row of its key (see
  above); on a full build, nothing.
  candidates: the alias the final select reads the candidate rows from.
  key_columns: the DynamoDB key, as a list of column names.
#}
{% macro keep_only_newer_than_existing(candidates, key_columns) %}
  {%- if is_incremental() -%}
    {%- set reprocess = reprocess_window() -%}
    {%- set key_matches = [] -%}
    {%- for column in key_columns -%}
      {%- do key_matches.append(candidates ~ '.' ~ column ~ ' = existing.' ~ column) -%}
    {%- endfor %}
    left join {{ this }} as existing
        on {{ key_matches | join(' and ') }}
    where existing._ordering_value is null
        or {{ candidates }}._ordering_value {{ '>=' if reprocess is not none else '>' }} existing._ordering_value
  {%- endif -%}
{% endmacro %}

{#
  The ingestion time an incremental run reads after: the newest _ingested_at in
  {{ this }} minus var raw_lookback_hours (1970-01-01 when the table is empty), as an
  SQL expression. Shared by the staging models and the incremental marts
  (macros/marts/incremental_marts.sql).
#}
{% macro lookback_cutoff() %}
  {{ return(adapter.dispatch('lookback_cutoff', 'dynamodb_lakehouse')()) }}
{% endmacro %}

{% macro default__lookback_cutoff() -%}
(
            select
                coalesce(
                    {{ dbt.dateadd('hour', -var('raw_lookback_hours'), 'max(_ingested_at)') }},
                    timestamp '1970-01-01 00:00:00'
                )
            from {{ this }}
        )
{%- endmacro %}

{#
  DuckDB and Athena: the cutoff as a literal, looked up before the model's query runs.
  Both engines prune by a comparison with a constant, not with a subquery's result:
  DuckDB skips Parquet row groups and hive partitions (measured on 2M raw rows, the
  incremental staging query took a third of the time), Athena skips the change log's
  `_ingest_hour` partitions at planning, so the bytes it scans grow with the new data.
  Unit tests keep the subquery: their {{ this }} is a fixture that exists only inside
  the test's query.
#}
{% macro duckdb__lookback_cutoff() -%}
  {{ return(literal_lookback_cutoff()) }}
{%- endmacro %}

{% macro athena__lookback_cutoff() -%}
  {{ return(literal_lookback_cutoff()) }}
{%- endmacro %}

{% macro literal_lookback_cutoff() -%}
  {%- if not execute or model.resource_type == 'unit_test' -%}
    {{ return(default__lookback_cutoff()) }}
  {%- endif -%}
  {%- set found = run_query('select cast(max(_ingested_at) as varchar) from ' ~ this).rows -%}
  {%- set newest = found[0][0] if found else none -%}
  {%- if newest is none -%}
    timestamp '1970-01-01 00:00:00'
  {%- else -%}
    {{ dbt.dateadd('hour', -var('raw_lookback_hours'), "timestamp '" ~ newest ~ "'") }}
  {%- endif -%}
{%- endmacro %}

{#
  The `_ingest_hour` partition value (`yyyy-MM-dd-HH`, UTC) of a timestamp expression;
  of a literal it is a constant, which the engines fold before pruning partitions.
#}
{% macro ingest_hour_of(timestamp_expr) %}
  {{ return(adapter.dispatch('ingest_hour_of', 'dynamodb_lakehouse')(timestamp_expr)) }}
{% endmacro %}

{% macro default__ingest_hour_of(timestamp_expr) -%}
date_format({{ timestamp_expr }}, '%Y-%m-%d-%H')
{%- endmacro %}

{% macro duckdb__ingest_hour_of(timestamp_expr) -%}
strftime({{ timestamp_expr }}, '%Y-%m-%d-%H')
{%- endmacro %}
