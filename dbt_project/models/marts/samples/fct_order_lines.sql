{#
  Line items of current, non-deleted orders, with the order's date and currency.
  Incremental like its inputs (macros/marts/incremental_marts.sql): a run replaces the
  lines of the orders whose staged row changed and deletes the lines they lost. It
  reads only the recent rows of the two upstream marts (and_ingested_since_last_build);
  on DuckDB it deletes the changed orders' stored lines by order key, so it scans its
  own table once, in that delete.
#}
{{ incremental_mart_config('order_line_key', athena_partitioning(['month(order_date)']), replaced_by='order_key') }}
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
            {{ and_ingested_since_last_build() }}
    {%- endif %}
),

order_header as (
    select * from {{ ref('fct_orders') }}
    {%- if is_incremental() %}
        where order_key in (select order_key from changed_orders)
            {{ and_ingested_since_last_build() }}
    {%- endif %}
),

current_lines as (
    select
        order_lines.order_line_key,
        order_lines.order_key,
        {{ from_contract('orders', 'customer_id', 'order_lines.customer_id') }} as customer_id,
        {{ from_contract('orders', 'order_id', 'order_lines.order_id') }} as order_id,
        order_lines.line_number,
        order_lines.sku,
        order_lines.quantity,
        order_lines.unit_price,
        order_lines.is_quantity_valid,
        order_lines.is_unit_price_valid,
        order_lines.line_total,
        order_header.order_date,
        order_header.status,
        order_header.currency,
        -- The line's own problems, then its order's (a line of an order without a
        -- currency has none either).
        {{ quality_issues(['order_lines.quality_issues', 'order_header.quality_issues']) }} as quality_issues,
        order_lines._ingested_at
    from order_lines
    inner join order_header
        on order_lines.order_key = order_header.order_key
)

select * from current_lines
{#- An incremental run also emits, with a null _ingested_at, the lines a changed order
    no longer has, to delete them (macros/marts/incremental_marts.sql): on DuckDB one
    row per changed order, whose replaced_by delete takes all its stored lines; on
    Athena each stored line missing from current_lines, for the merge. #}
{%- set line_columns = [
    ['order_line_key', 'varchar'],
    ['order_key', 'varchar'],
    ['customer_id', 'varchar'],
    ['order_id', 'varchar'],
    ['line_number', 'bigint'],
    ['sku', 'varchar'],
    ['quantity', contract_sql_type('orders', 'line_items[].quantity')],
    ['unit_price', contract_sql_type('orders', 'line_items[].unit_price')],
    ['is_quantity_valid', 'boolean'],
    ['is_unit_price_valid', 'boolean'],
    ['line_total', 'decimal(38, ' ~ contract_cast('orders', 'line_items[].unit_price').scale ~ ')'],
    ['order_date', 'date'],
    ['status', 'varchar'],
    ['currency', 'varchar'],
    ['quality_issues', 'varchar'],
    ['_ingested_at', type_timestamp()]
] %}
{%- if is_incremental() and not emits_each_deleted_row() %}
union all
select
    {{ deleted_group_columns(line_columns, 'order_key', 'changed_orders') }}
from changed_orders
{%- elif is_incremental() %}
union all
select
    {{ deleted_stored_row_columns(line_columns, 'stored') }}
from {{ this }} as stored
inner join changed_orders
    on stored.order_key = changed_orders.order_key
left join current_lines
    on stored.order_line_key = current_lines.order_line_key
where current_lines.order_line_key is null
{%- endif %}
