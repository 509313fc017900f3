-- Every staged order carries the greatest ordering value the raw log holds for its key.
with latest_raw as (
    select
        customer_id,
        order_id,
        max(_ordering_value) as max_ordering_value
    from {{ source('dynamodb', 'orders') }}
    group by customer_id, order_id
)

select
    latest_raw.customer_id,
    latest_raw.order_id,
    latest_raw.max_ordering_value,
    staged._ordering_value as staged_ordering_value
from latest_raw
left join {{ ref('stg_dynamodb__orders') }} as staged
    on latest_raw.customer_id = staged.customer_id and latest_raw.order_id = staged.order_id
where staged._ordering_value is null
    or staged._ordering_value <> latest_raw.max_ordering_value
