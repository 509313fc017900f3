{#
  The rules of the current-state staging models (stg_dynamodb__customers,
  stg_dynamodb__orders: one row per DynamoDB key from the raw change log). Each model
  writes its CTE chain out (changes -> ranked -> latest -> cleaned -> final select);
  the predicates they share live here, so that the models cannot drift apart:

  - Which raw rows a run reads (raw_changes_this_run_reads). A full build reads all.
    An incremental run reads the rows ingested after the newest processed one, minus
    var raw_lookback_hours, so a batch that landed late is not missed. A reprocess run
    (vars reprocess_from / reprocess_to, macros/reprocess/) reads the rows whose
    _event_ts is in the range instead, whenever they were ingested, so a corrected raw
    batch is re-read.
  - Which change of a key wins (latest_change_first): the greatest _ordering_value,
    whatever the arrival order.
  - Whether the winner replaces the stored row (is_newer_than_existing): only if its
    ordering value is greater, so a late older event never overwrites a newer one; on
    a reprocess run an equal one does too, so a replayed change takes effect.

  Keys are not time-sliced, so these are merges on the key, not microbatch models.
  row_number() is used rather than QUALIFY, which Athena (Trino) does not have.
#}

{#
  The where clause (or nothing, on a full build) that keeps the raw changes an
  incremental run reads, by the rule above, from a raw change log selected from
  unqualified: the rows ingested after lookback_cutoff(), or on a reprocess run those
  whose _event_ts is in the range. Shared by every model that reads the change log
  incrementally (the current-state models and stg_dynamodb__customers_changes).
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
  The order of a key's changes with the winner first, for row_number() over the
  changes of a key: the greatest _ordering_value. The streaming job makes it unequal
  for any two distinct changes (it ends in the eventID), so this is the rule Hudi's
  upsert and the Spark job apply too; equal values are copies of one change,
  redelivered in a later batch, and the first delivery is kept, so that an
  incremental run (which keeps the stored row on a tie) and a full build agree. The
  raw current-state view (register_raw_sources) orders by this same macro. `newest_first=false` is the exact reverse (the winner last), for
  dim_customers_history, whose last version must be the change staging keeps.
  alias: the relation the columns are read from (none: unqualified).
#}
{% macro latest_change_first(alias=none, newest_first=true) -%}
  {%- set prefix = alias ~ '.' if alias else '' -%}
  {%- if newest_first -%}
    {{ prefix }}_ordering_value desc, {{ prefix }}_ingested_at asc
  {%- else -%}
    {{ prefix }}_ordering_value asc, {{ prefix }}_ingested_at desc
  {%- endif -%}
{%- endmacro %}

{#
  The condition under which an incremental run writes the candidate row `candidate`
  over `existing`, the stored row of its key (left-joined: null when the key is new):
  a newer ordering value, or on a reprocess run an equal one too.
#}
{% macro is_newer_than_existing(candidate, existing) -%}
  ({{ existing }}._ordering_value is null
    or {{ candidate }}._ordering_value {{ '>=' if reprocess_window() is not none else '>' }} {{ existing }}._ordering_value)
{%- endmacro %}

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
