{#
  Distinct customer change events, from the raw change log (every distinct change of
  every batch, on both targets); a redelivered event has the same _event_id.
  event_time: a microbatch model reading this one sees only the events of its batch.
#}
{{ config(event_time='event_ts') }}

with events as (
    select
        _event_id,
        _event_name,
        coalesce(_is_ttl_delete, false) as is_ttl_delete,
        cast(_event_ts as {{ type_timestamp() }}) as event_ts,
        -- Every delivery of an event carries the event's own time, so adding _event_ts
        -- to the partition changes no result; it lets a filter on event_ts (each
        -- microbatch of agg_daily_customer_activity) reach the raw scan instead of
        -- ranking the whole change log first.
        row_number() over (partition by _event_id, _event_ts order by _ingested_at asc) as delivery_rank
    from {{ source('dynamodb', 'customers_changes') }}
)

select
    _event_id as event_id,
    _event_name as event_name,
    is_ttl_delete,
    event_ts,
    cast(event_ts as date) as event_date
from events
where delivery_rank = 1
