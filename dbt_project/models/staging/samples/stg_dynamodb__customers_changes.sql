{#
  Every distinct customer change event (one row per _event_id), kept from the raw
  change log so that the models needing all the changes of a key (the history mart)
  or all the events of a day (the activity mart, through int_customers__change_events)
  read this table instead of raw: an incremental run reads raw only in the partitions
  written since its cutoff (macros/staging/current_state.sql, raw_changes_this_run_reads),
  so the raw bytes it scans grow with the new data, not with the log.

  A redelivered event (same _event_id, later batch) counts once: the row is its first
  delivery (earliest _ingested_at, then lowest _batch_id), as a full build over the
  whole log finds it. An incremental run adds the events it has not stored and
  replaces a stored event only with an earlier delivery of it (a batch that landed
  late inside the look-back window). On a reprocess run a re-read event replaces the
  stored one (a corrected raw batch) and a stored event of the range that raw no
  longer holds is deleted (emitted with a null _ingested_at, which the replace_live_rows
  strategy deletes, macros/materializations/replace_live_rows.sql). PII in clear:
  staging is restricted.
#}
{{ config(
    unique_key='_event_id',
    on_schema_change='append_new_columns',
    partitioned_by=athena_partitioning(['bucket(id, 16)']),
    **replace_live_rows_strategy()
) }}

{%- set reprocess = reprocess_window() %}

with changes as (
    select * from {{ source('dynamodb', 'customers_changes') }}
    {{ raw_changes_this_run_reads() }}
),

deliveries as (
    select
        id,
        cust_name,
        email,
        registration_date,
        _event_name,
        coalesce(_is_ttl_delete, false) as _is_ttl_delete,
        cast(_event_ts as {{ type_timestamp() }}) as _event_ts,
        _ordering_value,
        _event_id,
        cast(_ingested_at as {{ type_timestamp() }}) as _ingested_at,
        _batch_id,
        row_number() over (partition by _event_id order by _ingested_at asc, _batch_id asc) as delivery_rank
    from changes
),

first_deliveries as (
    select
        id,
        cust_name,
        email,
        registration_date,
        _event_name,
        _is_ttl_delete,
        _event_ts,
        _ordering_value,
        _event_id,
        _ingested_at,
        _batch_id
    from deliveries
    where delivery_rank = 1
)

select
    first_deliveries.id,
    first_deliveries.cust_name,
    first_deliveries.email,
    first_deliveries.registration_date,
    first_deliveries._event_name,
    first_deliveries._is_ttl_delete,
    first_deliveries._event_ts,
    first_deliveries._ordering_value,
    first_deliveries._event_id,
    first_deliveries._ingested_at,
    first_deliveries._batch_id
from first_deliveries
{%- if is_incremental() %}
left join {{ this }} as stored
    on first_deliveries._event_id = stored._event_id
where stored._event_id is null
    or first_deliveries._ingested_at {{ '<=' if reprocess is not none else '<' }} stored._ingested_at
{%- endif %}
{%- if is_incremental() and reprocess is not none %}
union all
select
    stored.id,
    stored.cust_name,
    cast(null as varchar) as email,
    cast(null as varchar) as registration_date,
    stored._event_name,
    stored._is_ttl_delete,
    stored._event_ts,
    stored._ordering_value,
    stored._event_id,
    cast(null as {{ type_timestamp() }}) as _ingested_at,
    stored._batch_id
from {{ this }} as stored
where {{ in_reprocess_window('stored._event_ts') }}
    and not exists (select 1 from first_deliveries as reread where reread._event_id = stored._event_id)
{%- endif %}
