{#
  dim_customers_history against the current-state staging model: a key is live in
  stg_dynamodb__customers exactly when it has a current version, and that version
  starts with the change staging keeps (same event; an event belongs to one key, so
  the event ids are compared, without hashing every staged key). When staging keeps a
  backfilled snapshot that repeated the version before it (the history adds no version
  for it, macros/staging/backfill_snapshots.sql), the key's current version is matched
  by key instead. Every closed version
  ends where the key's next version starts or at a delete, never later, so versions
  of a key never overlap.

  On an incremental build (macros/tests/changed_rows_only.sql) only what the build
  could have changed is checked, by the narrowing below: the staged rows and the
  history rows written after their model's recorded cutoff (a run rewrites all
  versions of a key it touches), each against the whole other table. Otherwise every
  row. The cutoffs are recorded because both models have tests declared with
  `where: __changed_rows_only__` in their YAML.
#}
{%- set narrowed = data_tests_may_skip_unchanged_rows() if execute else false -%}
{%- set history_cutoff = literal_recorded_cutoff('dim_customers_history') if narrowed else none -%}
{%- set staging_cutoff = literal_recorded_cutoff('stg_dynamodb__customers') if narrowed else none -%}
{%- set narrowed = history_cutoff is not none and staging_cutoff is not none -%}

with history as (
    select * from {{ ref('dim_customers_history') }}
    {%- if narrowed %}
    where _ingested_at > {{ history_cutoff }}
    {%- endif %}
),

live_staged as (
    -- A live snapshot the history may have folded into the version before it is
    -- matched by key; its key is hashed only for such rows.
    select
        _event_id,
        case
            when {{ is_backfilled_snapshot('_event_id') }}
                then {{ keyed_surrogate_key(['id', 'cust_name'], 'customer_key') }}
        end as snapshot_customer_key
    from {{ ref('stg_dynamodb__customers') }}
    where not is_deleted
    {%- if narrowed %}
        and _ingested_at > {{ staging_cutoff }}
    {%- endif %}
),

staged_without_current_version as (
    select
        live_staged._event_id as event_id,
        live_staged.snapshot_customer_key as customer_key,
        'live staged change is not a current version' as problem
    from live_staged
    where not exists (
        select 1
        from {{ ref('dim_customers_history') }} as versions
        where
            versions.is_current
            and (
                versions.version_event_id = live_staged._event_id
                or versions.customer_key = live_staged.snapshot_customer_key
            )
    )
),

current_version_not_staged as (
    select
        history.version_event_id as event_id,
        history.customer_key,
        'current version is not the live staged change' as problem
    from history
    where history.is_current
        and not exists (
            select 1
            from {{ ref('stg_dynamodb__customers') }} as staged
            where not staged.is_deleted and staged._event_id = history.version_event_id
        )
        and not exists (
            select 1
            from {{ ref('stg_dynamodb__customers') }} as staged
            where
                not staged.is_deleted
                and {{ is_backfilled_snapshot('staged._event_id') }}
                and {{ keyed_surrogate_key(['staged.id', 'staged.cust_name'], 'customer_key') }}
                = history.customer_key
        )
),

overlapping_versions as (
    select
        later.version_event_id as event_id,
        earlier.customer_key,
        'versions overlap or leave a gap without a delete' as problem
    from history as earlier
    inner join history as later
        on earlier.customer_key = later.customer_key
        and earlier.version_number + 1 = later.version_number
    where earlier.valid_to is null
        or earlier.valid_to > later.valid_from
        or (not earlier.is_deleted and earlier.valid_to <> later.valid_from)
)

select * from staged_without_current_version
union all
select * from current_version_not_staged
union all
select * from overlapping_versions
