{#
  dim_customers_history against the current-state staging model, over every key:
  a key is live in stg_dynamodb__customers exactly when it has a current version,
  and that version starts with the change staging keeps (same event); every closed
  version ends where the key's next version starts or at a delete, never later, so
  versions of a key never overlap.
#}
with history as (
    select * from {{ ref('dim_customers_history') }}
),

live_customers as (
    select
        {{ keyed_surrogate_key(['id', 'cust_name'], 'customer_key') }} as customer_key,
        _event_id
    from {{ ref('stg_dynamodb__customers') }}
    where not is_deleted
),

current_versions as (
    select
        customer_key,
        version_event_id
    from history
    where is_current
),

state_mismatches as (
    select
        coalesce(live_customers.customer_key, current_versions.customer_key) as customer_key,
        'current version is not the live staged change' as problem
    from live_customers
    full outer join current_versions
        on live_customers.customer_key = current_versions.customer_key
    where live_customers._event_id is null
        or current_versions.version_event_id is null
        or live_customers._event_id <> current_versions.version_event_id
),

overlapping_versions as (
    select
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

select * from state_mismatches
union all
select * from overlapping_versions
