[#
  stg_dynamodb__<raw_table>_changes: every distinct change event of a raw table, one row
  per _event_id at its first delivery.

  The hand-written stg_dynamodb__customers_changes is this model for the customers
  contract with two differences: it has no _is_snapshot column (int_customers__change_events
  marks the backfilled snapshots itself), and the stored events its reprocess branch
  emits to be deleted carry null PII columns (email, registration_date), not the stored
  values; those rows are deleted, never written.
#]
{#
[% filter paragraph %][% include "editable.txt" %][% endfilter %]

[% filter paragraph %]
Every distinct change event of [[ who(contract) ]]: one row per _event_id at its first delivery (earliest
_ingested_at, then lowest _batch_id), as stg_dynamodb__customers_changes keeps them, so that a model needing
every change of a key (a history) reads this table, not the raw log: an incremental run reads raw only in
the partitions written since its cutoff (raw_changes_this_run_reads). It adds the events it has not stored
and replaces a stored one only with an earlier delivery; a reprocess run replaces the re-read events of its
range and deletes those raw no longer holds (emitted with a null _ingested_at, which the
replace_live_rows strategy deletes, macros/materializations/replace_live_rows.sql). A row from a backfilled export is the item's snapshot at
the export time, not a change made then, though the export names it INSERT: _is_snapshot marks it
(macros/staging/backfill_snapshots.sql), so that counts of events leave it out, as
int_customers__change_events does. Attributes the contract does not name stay in _extra_attributes
(DynamoDB JSON, by path). PII in clear: staging is restricted.
[% endfilter %]
#}
[% set columns = contract.business_columns %]
{{ config(
    unique_key='_event_id',
    on_schema_change='append_new_columns',
    partitioned_by=athena_partitioning(['bucket([[ contract.key_columns[0] ]], 16)']),
    **replace_live_rows_strategy()
) }}

{%- set reprocess = reprocess_window() %}

with changes as (
    select * from {{ source('[[ source_name ]]', '[[ contract.changes_table ]]') }}
    {{ raw_changes_this_run_reads() }}
),

deliveries as (
    select
[% for column in columns %]
        [[ column ]],
[% endfor %]
        _extra_attributes,
        _event_name,
        coalesce(_is_ttl_delete, false) as _is_ttl_delete,
        cast(_event_ts as {{ type_timestamp() }}) as _event_ts,
        _ordering_value,
        _event_id,
        cast(_ingested_at as {{ type_timestamp() }}) as _ingested_at,
        _batch_id,
        {{ is_backfilled_snapshot('_event_id') }} as _is_snapshot,
        row_number() over (partition by _event_id order by _ingested_at asc, _batch_id asc) as delivery_rank
    from changes
),

first_deliveries as (
    select
[% for column in columns %]
        [[ column ]],
[% endfor %]
        _extra_attributes,
        _event_name,
        _is_ttl_delete,
        _event_ts,
        _ordering_value,
        _event_id,
        _ingested_at,
        _batch_id,
        _is_snapshot
    from deliveries
    where delivery_rank = 1
)

select
[% for column in columns %]
    first_deliveries.[[ column ]],
[% endfor %]
    first_deliveries._extra_attributes,
    first_deliveries._event_name,
    first_deliveries._is_ttl_delete,
    first_deliveries._event_ts,
    first_deliveries._ordering_value,
    first_deliveries._event_id,
    first_deliveries._ingested_at,
    first_deliveries._batch_id,
    first_deliveries._is_snapshot
from first_deliveries
{%- if is_incremental() %}
left join {{ this }} as stored
    on first_deliveries._event_id = stored._event_id
where stored._event_id is null
    or first_deliveries._ingested_at {{ '<=' if reprocess is not none else '<' }} stored._ingested_at
{%- endif %}
{%- if is_incremental() and reprocess is not none %}
union all
select
[% for column in columns %]
    stored.[[ column ]],
[% endfor %]
    stored._extra_attributes,
    stored._event_name,
    stored._is_ttl_delete,
    stored._event_ts,
    stored._ordering_value,
    stored._event_id,
    cast(null as {{ type_timestamp() }}) as _ingested_at,
    stored._batch_id,
    stored._is_snapshot
from {{ this }} as stored
where {{ in_reprocess_window('stored._event_ts') }}
    and not exists (select 1 from first_deliveries as reread where reread._event_id = stored._event_id)
{%- endif %}
