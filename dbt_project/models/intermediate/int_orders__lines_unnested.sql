{# One row per line item of every current, non-deleted order; money kept exact. #}
with orders as (
    select
        customer_id,
        order_id,
        order_key,
        line_items
    from {{ ref('stg_dynamodb__orders') }}
    where not is_deleted
),

order_lines as (
    select
        orders.customer_id,
        orders.order_id,
        orders.order_key,
        line.line_number,
        line.sku,
        line.quantity as quantity_text,
        line.unit_price as unit_price_text,
        try_cast(line.quantity as bigint) as quantity,
        {{ exact_decimal('line.unit_price', 18, 2) }} as unit_price
    from orders
    {{ unnest_struct_array('orders.line_items', 'line', ['sku', 'quantity', 'unit_price'], 'line_number') }}
)

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
    cast(cast(quantity as decimal(18, 0)) * unit_price as decimal(38, 2)) as line_total,
    order_key || '#' || cast(line_number as varchar) as order_line_key
from order_lines
