{#
  Customer registrations, deletes (churn) and TTL expiries per day of the event.
  Change events never change once written, so a day is recomputed only when events of
  that day arrive: microbatch, one batch per activity_date. A scheduled run redoes the
  last `lookback` days (late CDC deliveries); older days are redone on demand with
  --event-time-start/--event-time-end (see _marts__models.yml).
#}
{{ config(
    materialized='incremental',
    incremental_strategy='microbatch',
    event_time='activity_date',
    batch_size='day',
    lookback=2,
    begin=var('activity_begin'),
    full_refresh=false,
    unique_key=athena_only(['activity_date']),
    partitioned_by=athena_partitioning(['month(activity_date)'])
) }}

select
    event_date as activity_date,
    sum(case when event_name = 'INSERT' then 1 else 0 end) as registrations,
    sum(case when event_name = 'MODIFY' then 1 else 0 end) as profile_updates,
    sum(case when event_name = 'REMOVE' and not is_ttl_delete then 1 else 0 end) as deletes,
    sum(case when event_name = 'REMOVE' and is_ttl_delete then 1 else 0 end) as ttl_deletes,
    sum(
        case
            when event_name = 'INSERT' then 1
            when event_name = 'REMOVE' then -1
            else 0
        end
    ) as net_customer_change
from {{ ref('int_customers__change_events') }}
group by event_date
