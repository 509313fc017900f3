{#
  Whether a raw change row is an item's snapshot from a backfilled DynamoDB export
  rather than a change event. `lakehouse backfill` gives every export line an eventID
  starting with 'export:' (SNAPSHOT_EVENT_ID_PREFIX in streaming/io/dynamodb_export.py;
  tests/io/test_backfill_snapshots.py keeps the two equal). A snapshot says what the item
  held at the export time, not that it was written then: a full export names every
  item INSERT, and an incremental export with the NEW_IMAGE view names an update
  INSERT. So the activity mart does not count snapshots, and the history mart makes
  one a version only when it shows something the change events did not.
  event_id: the column (or expression) holding the row's eventID.
#}
{% macro is_backfilled_snapshot(event_id) -%}
  coalesce({{ event_id }} like 'export:%', false)
{%- endmacro %}
