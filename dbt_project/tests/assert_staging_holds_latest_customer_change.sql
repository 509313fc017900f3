-- Every staged customer carries the greatest ordering value the raw log holds for its
-- key: a newer change lost by an incremental run (e.g. ingested before the lookback
-- window) shows up here.
with latest_raw as (
    select
        id,
        cust_name,
        max(_ordering_value) as max_ordering_value
    from {{ source('dynamodb', 'customers') }}
    group by id, cust_name
)

select
    latest_raw.id,
    latest_raw.cust_name,
    latest_raw.max_ordering_value,
    staged._ordering_value as staged_ordering_value
from latest_raw
left join {{ ref('stg_dynamodb__customers') }} as staged
    on latest_raw.id = staged.id and latest_raw.cust_name = staged.cust_name
where staged._ordering_value is null
    or staged._ordering_value <> latest_raw.max_ordering_value
