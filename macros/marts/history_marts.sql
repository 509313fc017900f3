{#
  The tail of dim_customers_history's final select on an incremental run, after
  `select * from key_versions`: the rows through which the run drops the stored
  versions a touched key no longer has. A new change only adds versions (a late one
  in the middle); versions disappear only when a reprocess run re-reads a corrected
  raw batch, and then the table must still equal a full build. Same pattern as
  lines_lost_by_changed_orders (macros/marts/incremental_marts.sql): on DuckDB
  (emits_each_deleted_row false) one row per touched key with a null _ingested_at,
  never inserted, whose replaced_by='customer_key' delete removes all the key's
  stored versions before the recomputed ones are appended; elsewhere (Athena's MERGE
  matches on version_event_id only) each stored version of a touched key that is not
  among its recomputed versions, with a null _ingested_at, for the merge to delete.
  columns: the model's columns in output order, as [name, SQL type] pairs.
#}
{% macro versions_lost_by_touched_keys(columns) %}
  {%- if is_incremental() and not emits_each_deleted_row() %}
union all
select
    {%- for name, type in columns %}
    {% if name == 'customer_key' %}touched_keys.customer_key{% else %}cast(null as {{ type }}) as {{ name }}{% endif %}
    {{- ',' if not loop.last }}
    {%- endfor %}
from touched_keys
  {%- elif is_incremental() %}
union all
select
    {%- for name, type in columns %}
    {% if name == '_ingested_at' %}cast(null as {{ type }}) as _ingested_at{% else %}stored.{{ name }}{% endif %}
    {{- ',' if not loop.last }}
    {%- endfor %}
from {{ this }} as stored
inner join touched_keys
    on stored.customer_key = touched_keys.customer_key
left join key_versions
    on stored.version_event_id = key_versions.version_event_id
where key_versions.version_event_id is null
  {%- endif %}
{% endmacro %}
