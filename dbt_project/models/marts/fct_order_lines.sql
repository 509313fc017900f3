{#
  Line items of current, non-deleted orders, with the order's date and currency.
  Incremental like its inputs (macros/marts/incremental_marts.sql): a run replaces the
  lines of the orders whose staged row changed and deletes the lines they lost.
#}
{{ incremental_mart_config('order_line_key', athena_partitioning(['month(order_date)'])) }}
-- Only an incremental run reads staging (for the changed orders); dbt must know it anyway.
-- depends_on: {{ ref('stg_dynamodb__orders') }}

with
{%- if is_incremental() %}
changed_orders as (
    select order_key from {{ ref('stg_dynamodb__orders') }}
    {{ staged_changes_since_last_build() }}
),
{%- endif %}

order_lines as (
    select * from {{ ref('int_orders__lines_unnested') }}
    {%- if is_incremental() %}
        where order_key in (select order_key from changed_orders)
    {%- endif %}
),

order_header as (
    select * from {{ ref('fct_orders') }}
    {%- if is_incremental() %}
        where order_key in (select order_key from changed_orders)
    {%- endif %}
),

current_lines as (
    select
        order_lines.order_line_key,
        order_lines.order_key,
        order_lines.customer_id,
        order_lines.order_id,
        order_lines.line_number,
        order_lines.sku,
        order_lines.quantity,
        order_lines.unit_price,
        order_lines.line_total,
        order_header.order_date,
        order_header.status,
        order_header.currency,
        order_lines._ingested_at
    from order_lines
    inner join order_header
        on order_lines.order_key = order_header.order_key
)

select * from current_lines
{%- if is_incremental() %}

union all

-- Stored lines of a changed order that it no longer has: deleted by the merge.
select
    stored.order_line_key,
    stored.order_key,
    stored.customer_id,
    stored.order_id,
    stored.line_number,
    stored.sku,
    stored.quantity,
    stored.unit_price,
    stored.line_total,
    stored.order_date,
    stored.status,
    stored.currency,
    cast(null as {{ type_timestamp() }}) as _ingested_at
from {{ this }} as stored
inner join changed_orders
    on stored.order_key = changed_orders.order_key
left join current_lines
    on stored.order_line_key = current_lines.order_line_key
where current_lines.order_line_key is null
{%- endif %}
