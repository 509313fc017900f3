{# Customer registrations, deletes (churn) and TTL expiries per day of the event. #}
{{ config(partitioned_by=athena_partitioning(['month(activity_date)'])) }}

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
