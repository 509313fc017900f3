{#
  Current state per order key (customer_id, order_id) from the raw change log; same
  incremental, ordering and reprocessing rules as stg_dynamodb__customers. Numbers
  are cast as the contract says; a value that does not fit exactly becomes null and
  is flagged.
#}
{{ config(
    unique_key=['customer_id', 'order_id'],
    incremental_strategy='merge',
    on_schema_change='fail',
    partitioned_by=athena_partitioning(['bucket(customer_id, 16)'])
) }}
{% set reprocess = reprocess_window() %}

with changes as (
    select *
    from {{ source('dynamodb', 'orders') }}
    {% if is_incremental() and reprocess is not none %}
        where _event_ts >= timestamp '{{ reprocess.start }} 00:00:00'
            and _event_ts < timestamp '{{ reprocess.end }} 00:00:00'
    {% elif is_incremental() %}
        where _ingested_at > (
            select
                coalesce(
                    {{ dbt.dateadd('hour', -var('raw_lookback_hours'), 'max(_ingested_at)') }},
                    timestamp '1970-01-01 00:00:00'
                )
            from {{ this }}
        )
    {% endif %}
),

ranked as (
    select
        changes.*,
        row_number() over (
            partition by changes.customer_id, changes.order_id
            order by changes._ordering_value desc, changes._ingested_at asc, changes._event_id asc
        ) as change_rank
    from changes
),

latest as (
    select * from ranked
    where change_rank = 1
),

cleaned as (
    select
        customer_id,
        order_id,
        customer_id || '#' || order_id as order_key,
        created_at as created_at_text,
        {{ parse_iso_timestamp('created_at') }} as created_at,
        upper(trim(status)) as status,
        amount as amount_text,
        {{ exact_decimal('amount', 18, 2) }} as amount,
        upper(trim(currency)) as currency,
        is_gift,
        gift_message,
        tags,
        package_weights_kg,
        {{ binary_to_hex('receipt_digest') }} as receipt_digest_hex,
        line_items,
        shipping_address,
        _event_name as last_event_name,
        coalesce(_is_deleted, false) as is_deleted,
        coalesce(_is_ttl_delete, false) as is_ttl_delete,
        cast(_event_ts as {{ type_timestamp() }}) as _event_ts,
        _ordering_value,
        _event_id,
        cast(_ingested_at as {{ type_timestamp() }}) as _ingested_at,
        _batch_id
    from latest
)

select
    cleaned.customer_id,
    cleaned.order_id,
    cleaned.order_key,
    cleaned.created_at,
    cleaned.created_at_text,
    cleaned.status,
    cleaned.amount,
    cleaned.amount_text,
    cleaned.currency,
    cleaned.is_gift,
    cleaned.gift_message,
    cleaned.tags,
    cleaned.package_weights_kg,
    cleaned.receipt_digest_hex,
    cleaned.line_items,
    cleaned.shipping_address,
    cleaned.last_event_name,
    cleaned.is_deleted,
    cleaned.is_ttl_delete,
    cleaned._event_ts,
    cleaned._ordering_value,
    cleaned._event_id,
    cleaned._ingested_at,
    cleaned._batch_id,
    (cleaned.amount is not null or cleaned.amount_text is null) as is_amount_valid
from cleaned
{% if is_incremental() %}
    left join {{ this }} as existing
        on cleaned.customer_id = existing.customer_id and cleaned.order_id = existing.order_id
    where existing._ordering_value is null
        or cleaned._ordering_value {{ '>=' if reprocess is not none else '>' }} existing._ordering_value
{% endif %}
