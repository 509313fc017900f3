{#
  Current, non-deleted orders with their status attributes and line totals. Columns
  from contract attributes go through from_contract (PII protected as the contracts say).
  Incremental: a run recomputes only the orders whose staged row changed and deletes
  the deleted ones (macros/marts/incremental_marts.sql).
#}
{{ incremental_mart_config('order_key', athena_partitioning(['month(order_date)'])) }}

with orders as (
    select * from {{ ref('stg_dynamodb__orders') }}
    {{ staged_changes_since_last_build() }}
),

statuses as (
    select * from {{ ref('order_statuses') }}
),

line_totals as (
    select
        order_key,
        count(*) as line_count,
        sum(line_total) as lines_total
    from {{ ref('int_orders__lines_unnested') }}
    {%- if is_incremental() %}
        where order_key in (select order_key from orders)
            {{ and_ingested_since_last_build() }}
    {%- endif %}
    group by order_key
)

select
    orders.order_key,
    {{ from_contract('orders', 'customer_id', 'orders.customer_id') }} as customer_id,
    {{ from_contract('orders', 'order_id', 'orders.order_id') }} as order_id,
    orders.created_at,
    {{ from_contract('orders', 'status', 'orders.status') }} as status,
    statuses.description as status_description,
    orders.amount,
    orders.is_amount_valid,
    {{ from_contract('orders', 'currency', 'orders.currency') }} as currency,
    line_totals.lines_total,
    orders._event_ts as last_changed_at,
    -- A struct field, which sqlfluff takes for a table reference. The contract marks the
    -- whole address PII, so the country is protected like it.
    {{ from_contract(
        'orders', 'shipping_address', 'orders.shipping_address.country'
    ) }} as shipping_country, -- noqa: RF01
    cast(orders.created_at as date) as order_date,
    coalesce(statuses.is_final, false) as is_final_status,
    coalesce(statuses.counts_as_revenue, false) as counts_as_revenue,
    coalesce(orders.is_gift, false) as is_gift,
    coalesce(line_totals.line_count, 0) as line_count,
    coalesce(orders.amount = line_totals.lines_total, false) as amount_matches_lines,
    orders.quality_issues,
    {{ ingested_at_unless_deleted('orders') }} as _ingested_at
from orders
left join statuses
    on orders.status = statuses.code
left join line_totals
    on orders.order_key = line_totals.order_key
{{ live_rows_unless_incremental('orders') }}
