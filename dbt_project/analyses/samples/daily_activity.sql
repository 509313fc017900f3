-- Customer and order activity per day since var from_date (default: 30 days ago):
-- registrations, deletes and TTL expiries next to the orders created that day.
-- Revenue per currency is in agg_daily_revenue_by_status (amounts of different
-- currencies are never added). Compile, then run the SQL in Athena:
--   lakehouse dbt compile --select daily_activity --vars '{from_date: 2026-11-01}'
{%- set default_from = (run_started_at - modules.datetime.timedelta(days=30)).strftime('%Y-%m-%d') %}
{%- set from_date = var('from_date', default_from) %}

with customers as (
    select
        activity_date,
        registrations,
        deletes,
        ttl_deletes,
        net_customer_change
    from {{ ref('agg_daily_customer_activity') }}
    where activity_date >= date '{{ from_date }}'
),

orders as (
    select
        order_date,
        sum(order_count) as orders,
        sum(case when counts_as_revenue then order_count else 0 end) as revenue_orders
    from {{ ref('agg_daily_revenue_by_status') }}
    where order_date >= date '{{ from_date }}'
    group by order_date
)

select
    coalesce(customers.activity_date, orders.order_date) as activity_date,
    coalesce(customers.registrations, 0) as registrations,
    coalesce(customers.deletes, 0) as deletes,
    coalesce(customers.ttl_deletes, 0) as ttl_deletes,
    coalesce(customers.net_customer_change, 0) as net_customer_change,
    coalesce(orders.orders, 0) as orders,
    coalesce(orders.revenue_orders, 0) as revenue_orders
from customers
full outer join orders
    on customers.activity_date = orders.order_date
order by activity_date
