-- agg_daily_customer_activity starts its daily microbatches at var('activity_begin');
-- change events before that day would never be counted, so say so instead of
-- silently under-counting. Fix: lower activity_begin and rebuild the mart for the
-- missing days with --event-time-start/--event-time-end.
{{ config(severity='warn') }}

select
    event_date,
    count(*) as change_events
from {{ ref('int_customers__change_events') }}
where event_date < cast('{{ var("activity_begin") }}' as date)
group by event_date
