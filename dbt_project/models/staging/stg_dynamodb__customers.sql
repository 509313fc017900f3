{#
  Current state per customer key (id, cust_name) from the raw change log. Which raw
  rows a run reads, which change of a key wins and when it replaces the stored row
  (incremental and reprocess runs): macros/staging/current_state.sql, shared
  with stg_dynamodb__orders.
#}
{% set key_columns = ['id', 'cust_name'] %}
{{ current_state_config(key_columns) }}

with {{ latest_change_per_key(source('dynamodb', 'customers_changes'), key_columns) }},

cleaned as (
    select
        id,
        cust_name,
        trim(cust_name) as customer_name,
        lower(trim(email)) as email,
        registration_date as registration_date_text,
        {{ typed_by_contract('customers', 'registration_date') }} as registration_date,
        {{ change_metadata_columns() }}
    from latest
)

select
    cleaned.id,
    cleaned.cust_name,
    cleaned.customer_name,
    cleaned.email,
    {{ is_valid_email('cleaned.email') }} as is_email_valid,
    case
        when {{ is_valid_email('cleaned.email') }} then split_part(cleaned.email, '@', 2)
    end as email_domain,
    cleaned.registration_date,
    cleaned.registration_date_text,
    {{ change_metadata_columns_of('cleaned') }}
from cleaned
{{ keep_only_newer_than_existing('cleaned', key_columns) }}
