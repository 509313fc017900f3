{#
  SCD2 history of customers: one row per version of each customer key (id, cust_name),
  built from the distinct change events (stg_dynamodb__customers_changes: each event
  once, at its first delivery) in event order (_ordering_value), so every INSERT and
  MODIFY is a version, also those between two dbt runs, and a late older event lands
  in its place. A version lasts until the key's next event; a version ended by a
  REMOVE is marked is_deleted. Events are ordered as the current-state staging model
  orders them, reversed (latest_change_first in macros/staging/current_state.sql), so
  the key's last version is the change that model keeps. A snapshot from a backfilled
  export is a version (version_event_name SNAPSHOT) only where it shows something the
  events did not (the `telling` step).

  Incremental: a run recomputes the whole history of the keys with an event stored
  since the table's newest _ingested_at minus raw_lookback_hours (on a reprocess run
  instead: with an event in the range, as the staging models do), reading all the
  stored events of those keys from stg_dynamodb__customers_changes, never the raw log;
  every other key is untouched. _ingested_at of a version is the newest _ingested_at
  of any event of its key, so every row a run writes is after its cutoff (the data
  tests narrow on that) and a full build computes the same value. PII per pii_mode,
  as in dim_customers; a change of pii_mode or the salt needs a --full-refresh.
#}
{{ incremental_mart_config(
    'version_event_id',
    athena_partitioning(['bucket(customer_id, 16)']),
    replaced_by='customer_key'
) }}

{%- set reprocess = reprocess_window() %}

with
{%- if is_incremental() %}
touched_keys as (
    -- The keys of the events the change table stored since the cutoff, or on a
    -- reprocess run of those whose event time is in the range.
    select distinct
        {{ keyed_surrogate_key(['id', 'cust_name'], 'customer_key') }} as customer_key,
        id,
        cust_name
    from {{ ref('stg_dynamodb__customers_changes') }}
    {%- if reprocess is not none %}
    where {{ in_reprocess_window('_event_ts') }}
    {%- else %}
    where _ingested_at > {{ lookback_cutoff() }}
    {%- endif %}
),
{%- endif %}

key_events as (
    select
        changes.id,
        changes.cust_name,
        changes.email,
        changes.registration_date,
        changes._event_name,
        changes._is_ttl_delete,
        changes._event_ts,
        changes._ordering_value,
        changes._event_id,
        changes._ingested_at,
        max(changes._ingested_at) over (partition by changes.id, changes.cust_name) as key_ingested_at
    from {{ ref('stg_dynamodb__customers_changes') }} as changes
    {%- if is_incremental() %}
        inner join touched_keys
            on changes.id = touched_keys.id and changes.cust_name = touched_keys.cust_name
    {%- endif %}
),

events as (
    select
        id,
        cust_name,
        trim(cust_name) as customer_name,
        lower(trim(email)) as email,
        {{ parse_iso_timestamp('registration_date') }} as registration_date,
        registration_date as registration_date_text,
        _event_name as event_name,
        _is_ttl_delete as is_ttl_delete,
        _event_ts as event_ts,
        _ordering_value,
        _event_id,
        {{ is_backfilled_snapshot('_event_id') }} as is_snapshot,
        cast(key_ingested_at as {{ type_timestamp() }}) as key_ingested_at,
        row_number() over (
            partition by id, cust_name
            order by {{ latest_change_first(newest_first=false) }}
        ) as event_position
    from key_events
),

compared as (
    select
        *,
        lag(event_name) over (partition by id, cust_name order by event_position) as previous_event_name,
        lag(email) over (partition by id, cust_name order by event_position) as previous_email,
        lag(registration_date) over (
            partition by id, cust_name order by event_position
        ) as previous_registration_date
    from events
),

telling as (
    -- A backfilled snapshot (macros/staging/backfill_snapshots.sql) is kept only where
    -- it tells what the events did not: the key's first known state, the item back
    -- after a REMOVE, values the events missed, or a delete they missed. Any other
    -- snapshot repeats the state before it, whose version simply goes on.
    select * from compared
    where
        not is_snapshot
        or (event_name = 'REMOVE' and previous_event_name is distinct from 'REMOVE')
        or (
            event_name <> 'REMOVE'
            and (
                previous_event_name is null
                or previous_event_name = 'REMOVE'
                or email is distinct from previous_email
                or registration_date is distinct from previous_registration_date
            )
        )
),

sequenced as (
    select
        *,
        lead(event_name) over (partition by id, cust_name order by event_position) as next_event_name,
        lead(is_ttl_delete) over (partition by id, cust_name order by event_position) as next_is_ttl_delete,
        lead(event_ts) over (partition by id, cust_name order by event_position) as next_event_ts
    from telling
),

key_versions as (
    select
        {{ keyed_surrogate_key(['id', 'cust_name'], 'customer_key') }} as customer_key,
        {{ from_contract('customers', 'id', 'id') }} as customer_id,
        row_number() over (partition by id, cust_name order by event_position) as version_number,
        _event_id as version_event_id,
        case when is_snapshot then 'SNAPSHOT' else event_name end as version_event_name,
        {{ from_contract('customers', 'cust_name', 'customer_name') }} as customer_name,
        {{ from_contract('customers', 'email', 'email') }} as email,
        -- A personal or company domain can name its owner: protected like the e-mail.
        {{ from_contract(
            'customers', 'email', "case when " ~ is_valid_email('email') ~ " then split_part(email, '@', 2) end"
        ) }} as email_domain,
        {{ is_valid_email('email') }} as is_email_valid,
        {{ from_contract('customers', 'registration_date', 'registration_date') }} as registration_date,
        {{ customer_quality_issues() }} as quality_issues,
        event_ts as valid_from,
        next_event_ts as valid_to,
        next_event_ts is null as is_current,
        coalesce(next_event_name = 'REMOVE', false) as is_deleted,
        coalesce(next_event_name = 'REMOVE' and next_is_ttl_delete, false) as is_ttl_delete,
        _ordering_value,
        key_ingested_at as _ingested_at
    from sequenced
    -- A REMOVE is not a version: it ends the one before it (if any).
    where event_name in ('INSERT', 'MODIFY')
)

select * from key_versions
{#- An incremental run also emits, with a null _ingested_at, the stored versions a
    touched key no longer has, to delete them (macros/marts/incremental_marts.sql): on
    DuckDB one row per touched key, whose replaced_by delete takes all its stored
    versions; on Athena each stored version missing from key_versions, for the merge.
    A new change only adds versions (a late one in the middle); versions disappear only
    when a reprocess run re-reads a corrected raw batch, and then the table must still
    equal a full build. #}
{%- set version_columns = [
    ['customer_key', 'varchar'],
    ['customer_id', 'varchar'],
    ['version_number', 'bigint'],
    ['version_event_id', 'varchar'],
    ['version_event_name', 'varchar'],
    ['customer_name', 'varchar'],
    ['email', 'varchar'],
    ['email_domain', 'varchar'],
    ['is_email_valid', 'boolean'],
    ['registration_date', type_timestamp()],
    ['quality_issues', 'varchar'],
    ['valid_from', type_timestamp()],
    ['valid_to', type_timestamp()],
    ['is_current', 'boolean'],
    ['is_deleted', 'boolean'],
    ['is_ttl_delete', 'boolean'],
    ['_ordering_value', 'varchar'],
    ['_ingested_at', type_timestamp()]
] %}
{%- if is_incremental() and not emits_each_deleted_row() %}
union all
select
    {{ deleted_group_columns(version_columns, 'customer_key', 'touched_keys') }}
from touched_keys
{%- elif is_incremental() %}
union all
select
    {{ deleted_stored_row_columns(version_columns, 'stored') }}
from {{ this }} as stored
inner join touched_keys
    on stored.customer_key = touched_keys.customer_key
left join key_versions
    on stored.version_event_id = key_versions.version_event_id
where key_versions.version_event_id is null
{%- endif %}
