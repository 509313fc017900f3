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
{{ lines_lost_by_changed_orders([
    ['customer_id', 'varchar'],
    ['order_id', 'varchar'],
    ['order_key', 'varchar'],
    ['line_number', 'bigint'],
    ['sku', 'varchar'],
    ['quantity', 'bigint'],
    ['unit_price', 'decimal(18, 2)'],
    ['quantity_text', 'varchar'],
    ['unit_price_text', 'varchar'],
    ['_ingested_at', type_timestamp()],
    ['line_total', 'decimal(38, 2)'],
    ['order_line_key', 'varchar']
]) }}
