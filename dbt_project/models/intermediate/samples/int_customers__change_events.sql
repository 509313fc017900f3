{#
  Distinct customer change events without their PII, for activity counts: a view
  over stg_dynamodb__customers_changes, which already holds each event once (a
  redelivered event has the same _event_id), so that neither the activity mart nor
  this model's tests read the raw change log. Snapshots from a backfilled export are
  left out: they are an item's state at the export time, not a registration or an
  update made then (macros/staging/backfill_snapshots.sql).
  event_time: a microbatch model reading this one sees only the events of its batch.
#}
{{ config(event_time='event_ts') }}

select
    _event_id as event_id,
    _event_name as event_name,
    _is_ttl_delete as is_ttl_delete,
    _event_ts as event_ts,
    cast(_event_ts as date) as event_date
from {{ ref('stg_dynamodb__customers_changes') }}
where not {{ is_backfilled_snapshot('_event_id') }}
