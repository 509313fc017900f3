{#
  Current, non-deleted customers. Columns from contract attributes go through
  from_contract, which protects those the contracts mark PII (per var pii_mode);
  customer_key is a keyed pseudonym of the key, never a plain hash of it.
  Incremental: a run recomputes only the customers whose staged row changed and
  deletes the deleted ones (macros/marts/incremental_marts.sql). A change of pii_mode,
  the PII key, a pii flag or seed free_mail_domains needs a --full-refresh.
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
    {{ keyed_surrogate_key(['customers.id', 'customers.cust_name'], 'customer_key') }} as customer_key,
    {{ from_contract('customers', 'id', 'customers.id') }} as customer_id,
    {{ from_contract('customers', 'cust_name', 'customers.customer_name') }} as customer_name,
    {{ from_contract('customers', 'email', 'customers.email') }} as email,
    -- A personal or company domain can name its owner: protected like the e-mail.
    {{ from_contract('customers', 'email', 'customers.email_domain') }} as email_domain,
    customers.is_email_valid,
    (free_mail_domains.domain is not null) as is_free_mail,
    {{ from_contract('customers', 'registration_date', 'customers.registration_date') }} as registration_date,
    {{ from_contract(
        'customers', 'registration_date', 'cast(customers.registration_date as date)'
    ) }} as registration_day,
    customers._event_ts as last_changed_at,
    customers.quality_issues,
    {{ ingested_at_unless_deleted('customers') }} as _ingested_at
from customers
left join free_mail_domains
    on customers.email_domain = free_mail_domains.domain
{{ live_rows_unless_incremental('customers') }}
