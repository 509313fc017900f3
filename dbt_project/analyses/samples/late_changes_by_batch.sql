-- How many changes per raw batch arrived late, i.e. older than a change of the same
-- key ingested before them (these lose in staging). Run with `dbt compile` and paste.
with changes as (
    select
        id,
        cust_name,
        _batch_id,
        _ordering_value,
        max(_ordering_value) over (
            partition by id, cust_name
            order by _ingested_at
            rows between unbounded preceding and 1 preceding
        ) as greatest_earlier_ordering_value
    from {{ source('dynamodb', 'customers_changes') }}
)

select
    _batch_id,
    count(*) as changes,
    sum(case when _ordering_value < greatest_earlier_ordering_value then 1 else 0 end) as late_changes
from changes
group by _batch_id
order by _batch_id
