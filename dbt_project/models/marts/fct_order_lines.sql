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
{%- if is_incremental() and not emits_each_deleted_row() %}

union all

-- DuckDB: one row per changed order, never inserted; the run deletes all stored lines
-- of each order it emits (replaced_by), so the lines an order lost need no lookup.
select
    cast(null as varchar) as order_line_key,
    changed_orders.order_key,
    cast(null as varchar) as customer_id,
    cast(null as varchar) as order_id,
    cast(null as bigint) as line_number,
    cast(null as varchar) as sku,
    cast(null as bigint) as quantity,
    cast(null as decimal(18, 2)) as unit_price,
    cast(null as decimal(38, 2)) as line_total,
    cast(null as date) as order_date,
    cast(null as varchar) as status,
    cast(null as varchar) as currency,
    cast(null as {{ type_timestamp() }}) as _ingested_at
from changed_orders
{%- elif is_incremental() %}

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
