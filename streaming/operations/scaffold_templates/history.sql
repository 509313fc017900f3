[#
  dim_<raw_table>_history (scaffold --history): SCD2 versions of a raw table's keys from
  its change events.

  The hand-written dim_customers_history builds the customers' versions by the same
  steps (events -> compared -> telling -> sequenced -> versions). It differs in being
  incremental (a run rebuilds only the keys with a new event), in cleaning and
  flagging as stg_dynamodb__customers does, and in naming: customer_key and
  customer_id, version_event_name (SNAPSHOT for a kept snapshot) rather than
  _is_snapshot.
#]
{#
[% filter paragraph %][% include "editable.txt" %][% endfilter %]

[% filter paragraph %]
SCD2 history of [[ who(contract) ]]: one row per version of each key ([[ contract.key_columns | join(', ') ]]),
every INSERT and MODIFY of [[ changes_model(contract) ]] (each event once) in event order, as
dim_customers_history builds it. A version lasts until the key's next event; one ended by a REMOVE is
is_deleted. Events are ordered as the current-state model orders them, reversed (latest_change_first), so
the key's last version is the change that model keeps. A snapshot from a backfilled export (_is_snapshot) is
a version only where it shows something the events did not (the `telling` step), as in
dim_customers_history. Rebuilt as a table on every run (it reads every stored event); make it incremental
like dim_customers_history when it grows. Attributes the contract marks PII are protected (from_contract),
and item_key is a keyed pseudonym of the key.
[% endfilter %]
#}
[% set keys = contract.key_columns %]
[% set partition = keys | join(', ') %]
[% set values = non_key_columns(contract) %]
[% set typed = typed(contract) %]
[% set window = 'over (partition by ' ~ partition ~ ' order by event_position)' %]
[% macro protected(column) -%]
{{ from_contract('[[ contract.raw_table ]]', '[[ column ]]', [% if column in typed %]typed_by_contract('[[ contract.raw_table ]]', '[[ column ]]')[% else %]'[[ column ]]'[% endif %]) }} as [[ column ]]
[%- endmacro %]

with events as (
    select
        *,
        max(_ingested_at) over (partition by [[ partition ]]) as key_ingested_at,
        row_number() over (
            partition by [[ partition ]]
            order by {{ latest_change_first(newest_first=false) }}
        ) as event_position
    from {{ ref('[[ changes_model(contract) ]]') }}
),

compared as (
    select
        *,
        lag(_event_name) [[ window ]] as _previous_event_name[[ ',' if values ]]
[% for column in values %]
        lag([[ column ]]) [[ window ]] as _previous_[[ column ]][[ ',' if not loop.last ]]
[% endfor %]
    from events
),

telling as (
    -- A backfilled snapshot (macros/staging/backfill_snapshots.sql) is kept only where
    -- it tells what the events did not: the key's first known state, the item back
    -- after a REMOVE, values the events missed, or a delete they missed. Any other
    -- snapshot repeats the state before it, whose version simply goes on.
    select * from compared
    where
        not _is_snapshot
        or (_event_name = 'REMOVE' and _previous_event_name is distinct from 'REMOVE')
        or (
            _event_name <> 'REMOVE'
            and (
                _previous_event_name is null
                or _previous_event_name = 'REMOVE'
[% for column in values %]
                or [[ column ]] is distinct from _previous_[[ column ]]
[% endfor %]
            )
        )
),

sequenced as (
    select
        *,
        lead(_event_name) [[ window ]] as next_event_name,
        lead(_is_ttl_delete) [[ window ]] as next_is_ttl_delete,
        lead(_event_ts) [[ window ]] as next_event_ts
    from telling
),

versions as (
    select
        {{ keyed_surrogate_key([[ keys | sql_list ]], 'item_key') }} as item_key,
[% for column in keys %]
        [[ protected(column) ]],
[% endfor %]
        row_number() over (partition by [[ partition ]] order by event_position) as version_number,
        _event_id as version_event_id,
[% for column in values %]
        [[ protected(column) ]],
[% endfor %]
        _is_snapshot,
        _event_ts as valid_from,
        next_event_ts as valid_to,
        next_event_ts is null as is_current,
        coalesce(next_event_name = 'REMOVE', false) as is_deleted,
        coalesce(next_event_name = 'REMOVE' and next_is_ttl_delete, false) as is_ttl_delete,
        _ordering_value,
        key_ingested_at as _ingested_at
    from sequenced
    -- A REMOVE is not a version: it ends the one before it (if any).
    where _event_name in ('INSERT', 'MODIFY')
)

select * from versions
