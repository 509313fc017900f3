{#
  Current state per order key (customer_id, order_id) from the raw change log; the
  same CTE chain and rules as stg_dynamodb__customers (macros/staging/current_state.sql).
  Typed columns are cast as the contract says (typed_by_contract); a value that does
  not fit exactly becomes null and is flagged. A live order that breaks a business rule
  is kept and flagged in quality_issues (macros/quality/quality_issues.sql); the status
  codes it knows are seed order_statuses'.
#}
{{ config(
    unique_key=['customer_id', 'order_id'],
    incremental_strategy='merge',
    on_schema_change='append_new_columns',
    partitioned_by=athena_partitioning(['bucket(customer_id, 16)'])
) }}

with changes as (
    select * from {{ source('dynamodb', 'orders_changes') }}
    {{ raw_changes_this_run_reads() }}
),

ranked as (
    select
        changes.*,
        row_number() over (
            partition by changes.customer_id, changes.order_id
            order by {{ latest_change_first('changes') }}
        ) as change_rank
    from changes
),

latest as (
    select * from ranked
    where change_rank = 1
),

status_codes as (
    select code from {{ ref('order_statuses') }}
),

cleaned as (
    select
        customer_id,
        order_id,
        {{ composite_key(['customer_id', 'order_id']) }} as order_key,
        created_at as created_at_text,
        {{ typed_by_contract('orders', 'created_at') }} as created_at,
        upper(trim(status)) as status,
        amount as amount_text,
        {{ typed_by_contract('orders', 'amount') }} as amount,
        upper(trim(currency)) as currency,
        is_gift,
        gift_message,
        tags,
        package_weights_kg,
        {{ binary_to_hex('receipt_digest') }} as receipt_digest_hex,
        line_items,
        shipping_address,
        {{ change_metadata_columns() }}
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
    {{ change_metadata_columns_of('cleaned') }},
    (cleaned.amount is not null or cleaned.amount_text is null) as is_amount_valid,
    -- A deleted order has no business fields left to check.
    case
        when not cleaned.is_deleted then {{ order_quality_issues('cleaned', 'status_codes') }}
    end as quality_issues
from cleaned
left join status_codes
    on cleaned.status = status_codes.code
{%- if is_incremental() %}
left join {{ this }} as existing
    on cleaned.customer_id = existing.customer_id and cleaned.order_id = existing.order_id
where {{ is_newer_than_existing('cleaned', 'existing') }}
{%- endif %}
