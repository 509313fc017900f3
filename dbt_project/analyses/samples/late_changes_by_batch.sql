-- How many changes per raw batch arrived late, i.e. older than a change of the same
-- key ingested before them (these lose in staging). Run with `dbt compile` and paste.
-- The changes of one batch share their ingestion time, so none of them is ingested
-- before another: each is compared with the greatest change of its key in earlier
-- batches only. (Ordering the rows of one batch among themselves gave each engine,
-- and each run, its own count.)
with logged_changes as (
    select
        id,
        cust_name,
        _batch_id,
        _ingested_at,
        _ordering_value
    from {{ source('dynamodb', 'customers_changes') }}
),

per_ingestion as (
    select
        id,
        cust_name,
        _ingested_at,
        max(_ordering_value) as greatest_ordering_value
    from logged_changes
    group by id, cust_name, _ingested_at
),

before_each_ingestion as (
    select
        id,
        cust_name,
        _ingested_at,
        max(greatest_ordering_value) over (
            partition by id, cust_name
            order by _ingested_at
            rows between unbounded preceding and 1 preceding
        ) as greatest_earlier_ordering_value
    from per_ingestion
)

select
    logged_changes._batch_id,
    count(*) as changes,
    sum(
        case when logged_changes._ordering_value < earlier.greatest_earlier_ordering_value then 1 else 0 end
    ) as late_changes
from logged_changes
inner join before_each_ingestion as earlier
    on
        logged_changes.id = earlier.id
        and logged_changes.cust_name = earlier.cust_name
        and logged_changes._ingested_at = earlier._ingested_at
group by logged_changes._batch_id
order by _batch_id
