{# Line items of current, non-deleted orders, with the order's date and currency. #}
{{ config(partitioned_by=athena_partitioning(['month(order_date)'])) }}

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
    order_header.currency
from {{ ref('int_orders__lines_unnested') }} as order_lines
inner join {{ ref('fct_orders') }} as order_header
    on order_lines.order_key = order_header.order_key
