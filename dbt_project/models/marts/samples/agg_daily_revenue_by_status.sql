{# Orders and order value per day, status and currency (amounts never mix currencies). #}
{{ config(partitioned_by=athena_partitioning(['month(order_date)'])) }}

select
    order_date,
    status,
    currency,
    counts_as_revenue,
    count(*) as order_count,
    count(quality_issues) as flagged_order_count,
    sum(amount) as total_amount,
    sum(line_count) as line_count
from {{ ref('fct_orders') }}
where order_date is not null
group by order_date, status, currency, counts_as_revenue
