{#
  One row per line item of every current, non-deleted order; money kept exact.
  Incremental (macros/marts/incremental_marts.sql): a run unnests only the orders whose
  staged row changed, and deletes the stored lines such an order no longer has (the
  order was deleted or its list got shorter); on DuckDB by deleting all stored lines
  of each changed order, so the run does not scan this table to find the lost ones.
  A table, not a view: the tests here and the marts downstream read it several times
  per build.
#}
{{ incremental_mart_config('order_line_key', replaced_by='order_key') }}

with changed_orders as (
    select
        customer_id,
        order_id,
        order_key,
        line_items,
        is_deleted,
        _ingested_at
    from {{ ref('stg_dynamodb__orders') }}
    {{ staged_changes_since_last_build() }}
),

orders as (
    select * from changed_orders
    where not is_deleted
),

order_lines as (
    select
        orders.customer_id,
        orders.order_id,
        orders.order_key,
        orders._ingested_at,
        line.line_number,
        line.sku,
        line.quantity as quantity_text,
        line.unit_price as unit_price_text,
        try_cast(line.quantity as bigint) as quantity,
        {{ exact_decimal('line.unit_price', 18, 2) }} as unit_price
    from orders
    {{ unnest_struct_array('orders.line_items', 'line', ['sku', 'quantity', 'unit_price'], 'line_number') }}
),

current_lines as (
    select
        customer_id,
        order_id,
        order_key,
        line_number,
        sku,
        quantity,
        unit_price,
        quantity_text,
        unit_price_text,
        _ingested_at,
        cast(cast(quantity as decimal(18, 0)) * unit_price as decimal(38, 2)) as line_total,
        order_key || '#' || cast(line_number as varchar) as order_line_key
    from order_lines
)

select * from current_lines
{%- if is_incremental() and not emits_each_deleted_row() %}

union all

-- DuckDB: one row per changed order, never inserted; the run deletes all stored lines
-- of each order it emits (replaced_by), so the lines an order lost need no lookup.
select
    customer_id,
    order_id,
    order_key,
    cast(null as bigint) as line_number,
    cast(null as varchar) as sku,
    cast(null as bigint) as quantity,
    cast(null as decimal(18, 2)) as unit_price,
    cast(null as varchar) as quantity_text,
    cast(null as varchar) as unit_price_text,
    cast(null as {{ type_timestamp() }}) as _ingested_at,
    cast(null as decimal(38, 2)) as line_total,
    cast(null as varchar) as order_line_key
from changed_orders
{%- elif is_incremental() %}

union all

-- Stored lines of a changed order that it no longer has: deleted by the merge.
select
    stored.customer_id,
    stored.order_id,
    stored.order_key,
    stored.line_number,
    stored.sku,
    stored.quantity,
    stored.unit_price,
    stored.quantity_text,
    stored.unit_price_text,
    cast(null as {{ type_timestamp() }}) as _ingested_at,
    stored.line_total,
    stored.order_line_key
from {{ this }} as stored
inner join changed_orders
    on stored.order_key = changed_orders.order_key
left join current_lines
    on stored.order_line_key = current_lines.order_line_key
where current_lines.order_line_key is null
{%- endif %}
