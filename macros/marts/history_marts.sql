{#
  dim_customers_history on an incremental run: drops the stored versions a touched key
  no longer has (macros/marts/incremental_marts.sql, rows_lost_by_changed_groups). A new
  change only adds versions (a late one in the middle); versions disappear only when a
  reprocess run re-reads a corrected raw batch, and then the table must still equal a
  full build.
#}
{% macro versions_lost_by_touched_keys(columns) %}
  {{- rows_lost_by_changed_groups(columns, 'customer_key', 'touched_keys', 'version_event_id', 'key_versions') -}}
{% endmacro %}
