{#
  Current, non-deleted customers; PII columns protected per var pii_mode.
  Incremental: a run recomputes only the customers whose staged row changed and
  deletes the deleted ones (macros/marts/incremental_marts.sql). A change of pii_mode,
  pii_hash_salt or seed free_mail_domains needs a --full-refresh.
#}
{{ incremental_mart_config('customer_key', athena_partitioning(['month(registration_date)'])) }}

with customers as (
    select * from {{ ref('stg_dynamodb__customers') }}
    {{ staged_changes_since_last_build() }}
),

free_mail_domains as (
    select domain from {{ ref('free_mail_domains') }}
)

select
    {{ sha256_hex("customers.id || '|' || customers.cust_name") }} as customer_key,
    customers.id as customer_id,
    {{ protect_pii('customers.customer_name') }} as customer_name,
    {{ protect_pii('customers.email') }} as email,
    customers.email_domain,
    customers.is_email_valid,
    (free_mail_domains.domain is not null) as is_free_mail,
    customers.registration_date,
    cast(customers.registration_date as date) as registration_day,
    customers._event_ts as last_changed_at,
    {{ ingested_at_unless_deleted('customers') }} as _ingested_at
from customers
left join free_mail_domains
    on customers.email_domain = free_mail_domains.domain
{{ live_rows_unless_incremental('customers') }}
