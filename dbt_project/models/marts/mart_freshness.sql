{#
  How current each curated table is: the first query when numbers look stale. One row
  per table in marts/, rebuilt on every run after all of them (it reads each one), so
  a run where one failed skips it and built_at keeps the last good run's time.
  The three times answer three questions: built_at (is dbt running?), newest_ingested_at
  (is the stream delivering?), newest_event_at (how far the business events reach).
#}
{%- set built_at = 'cast(current_timestamp as ' ~ type_timestamp() ~ ')' %}
{%- set no_ingestion_time = 'cast(null as ' ~ type_timestamp() ~ ')' %}

select
    'dim_customers' as curated_table,
    count(*) as row_count,
    max(_ingested_at) as newest_ingested_at,
    max(last_changed_at) as newest_event_at,
    'last_changed_at' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('dim_customers') }}

union all

select
    'dim_customers_history' as curated_table,
    count(*) as row_count,
    max(_ingested_at) as newest_ingested_at,
    -- A REMOVE is no version: its time is the valid_to of the version it ended.
    max(coalesce(valid_to, valid_from)) as newest_event_at,
    'valid_from, valid_to' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('dim_customers_history') }}

union all

select
    'fct_orders' as curated_table,
    count(*) as row_count,
    max(_ingested_at) as newest_ingested_at,
    max(last_changed_at) as newest_event_at,
    'last_changed_at' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('fct_orders') }}

union all

select
    'fct_order_lines' as curated_table,
    count(*) as row_count,
    max(_ingested_at) as newest_ingested_at,
    cast(max(order_date) as {{ type_timestamp() }}) as newest_event_at,
    'order_date' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('fct_order_lines') }}

union all

select
    'agg_daily_revenue_by_status' as curated_table,
    count(*) as row_count,
    {{ no_ingestion_time }} as newest_ingested_at,
    cast(max(order_date) as {{ type_timestamp() }}) as newest_event_at,
    'order_date' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('agg_daily_revenue_by_status') }}

union all

select
    'agg_daily_customer_activity' as curated_table,
    count(*) as row_count,
    {{ no_ingestion_time }} as newest_ingested_at,
    cast(max(activity_date) as {{ type_timestamp() }}) as newest_event_at,
    'activity_date' as event_time_column,
    {{ built_at }} as built_at
from {{ ref('agg_daily_customer_activity') }}
