{# Current, non-deleted customers; PII columns protected per var pii_mode. #}
{{ config(partitioned_by=athena_partitioning(['month(registration_date)'])) }}

with customers as (
    select * from {{ ref('stg_dynamodb__customers') }}
    where not is_deleted
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
    customers._event_ts as last_changed_at
from customers
left join free_mail_domains
    on customers.email_domain = free_mail_domains.domain
