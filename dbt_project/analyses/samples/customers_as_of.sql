-- Every customer as they were at a point in time: var as_of (UTC; default now). Read
-- out of the SCD2 history dim_customers_history. A customer deleted before as_of is absent; one deleted after it is
-- present with the version it had then. Name and e-mail are pseudonyms, as in the marts.
--   lakehouse dbt compile --select customers_as_of --vars '{as_of: "2026-11-01 12:00:00"}'
{%- set as_of = var('as_of', run_started_at.strftime('%Y-%m-%d %H:%M:%S')) %}

select
    customer_key,
    customer_id,
    version_number,
    customer_name,
    email,
    email_domain,
    is_email_valid,
    registration_date,
    valid_from,
    valid_to
from {{ ref('dim_customers_history') }}
where
    valid_from <= timestamp '{{ as_of }}'
    and (valid_to is null or valid_to > timestamp '{{ as_of }}')
order by customer_id, customer_key
