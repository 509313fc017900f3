{#
  How current each curated table is: the first query when numbers look stale. One row
  per table in marts/, rebuilt on every run after all of them (it reads each one), so
  a run where one failed skips it and built_at keeps the last good run's time.
  The three times answer three questions: built_at (is dbt running?), newest_ingested_at
  (is the stream delivering?), newest_event_at (how far the business events reach).
#}
{%- set built_at = 'cast(current_timestamp as ' ~ type_timestamp() ~ ')' %}

{%- set ts = type_timestamp() %}
{#- Per table: its newest ingestion time (the daily aggregates keep none), its newest
    event time, and the column that event time comes from. A REMOVE is no version of
    dim_customers_history: its time is the valid_to of the version it ended. -#}
{%- set curated_tables = [
    ('dim_customers', 'max(_ingested_at)', 'max(last_changed_at)', 'last_changed_at'),
    ('dim_customers_history', 'max(_ingested_at)', 'max(coalesce(valid_to, valid_from))',
        'valid_from, valid_to'),
    ('fct_orders', 'max(_ingested_at)', 'max(last_changed_at)', 'last_changed_at'),
    ('fct_order_lines', 'max(_ingested_at)', 'cast(max(order_date) as ' ~ ts ~ ')', 'order_date'),
    ('agg_daily_revenue_by_status', 'cast(null as ' ~ ts ~ ')', 'cast(max(order_date) as ' ~ ts ~ ')',
        'order_date'),
    ('agg_daily_customer_activity', 'cast(null as ' ~ ts ~ ')', 'cast(max(activity_date) as ' ~ ts ~ ')',
        'activity_date'),
    ('agg_daily_invoiced_amount_by_tenant', 'cast(null as ' ~ ts ~ ')', 'cast(max(invoice_date) as ' ~ ts ~ ')',
        'invoice_date'),
] %}

{% for name, newest_ingested_at, newest_event_at, event_time_column in curated_tables %}
select
    '{{ name }}' as curated_table,
    count(*) as row_count,
    {{ newest_ingested_at }} as newest_ingested_at,
    {{ newest_event_at }} as newest_event_at,
    '{{ event_time_column }}' as event_time_column,
    {{ built_at }} as built_at
from {{ ref(name) }}
{% if not loop.last %}
union all
{% endif %}
{%- endfor %}
