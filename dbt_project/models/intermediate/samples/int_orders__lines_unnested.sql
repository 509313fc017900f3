{#
  One row per line item of every current, non-deleted order; quantity and unit price
  typed as the orders contract says, exact or null and flagged (typed_by_contract),
  so line_total is never computed from a rounded number. A line that breaks a business
  rule is kept and flagged in quality_issues (macros/quality/quality_issues.sql).
  Incremental (macros/marts/incremental_marts.sql): a run unnests only the orders whose
  staged row changed, and deletes the stored lines such an order no longer has (the
  order was deleted or its list got shorter); on DuckDB by deleting all stored lines
  of each changed order, so the run does not scan this table to find the lost ones.
  A table, not a view: the tests here and the marts downstream read it several times
  per build.
#}
{{ incremental_mart_config('order_line_key', replaced_by='order_key') }}
{#- Exact at the unit price's scale: a bigint quantity (19 digits) times the price. -#}
{%- set line_total_type = 'decimal(38, ' ~ contract_cast('orders', 'line_items[].unit_price').scale ~ ')' %}

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
        {{ typed_by_contract('orders', 'line_items[].quantity', 'line.quantity') }} as quantity,
        {{ typed_by_contract('orders', 'line_items[].unit_price', 'line.unit_price') }} as unit_price
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
        (quantity is not null or quantity_text is null) as is_quantity_valid,
        (unit_price is not null or unit_price_text is null) as is_unit_price_valid,
        {{ order_line_quality_issues() }} as quality_issues,
        _ingested_at,
        cast(cast(quantity as decimal(19, 0)) * unit_price as {{ line_total_type }}) as line_total,
        {{ composite_key(['customer_id', 'order_id', 'cast(line_number as varchar)']) }} as order_line_key
    from order_lines
)

select * from current_lines
{#- An incremental run also emits, with a null _ingested_at, the lines a changed order
    no longer has, to delete them (macros/marts/incremental_marts.sql): on DuckDB one
    row per changed order, whose replaced_by delete takes all its stored lines; on
    Athena each stored line missing from current_lines, for the merge. #}
{%- set line_columns = [
    ['customer_id', 'varchar'],
    ['order_id', 'varchar'],
    ['order_key', 'varchar'],
    ['line_number', 'bigint'],
    ['sku', 'varchar'],
    ['quantity', contract_sql_type('orders', 'line_items[].quantity')],
    ['unit_price', contract_sql_type('orders', 'line_items[].unit_price')],
    ['quantity_text', 'varchar'],
    ['unit_price_text', 'varchar'],
    ['is_quantity_valid', 'boolean'],
    ['is_unit_price_valid', 'boolean'],
    ['quality_issues', 'varchar'],
    ['_ingested_at', type_timestamp()],
    ['line_total', line_total_type],
    ['order_line_key', 'varchar']
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
