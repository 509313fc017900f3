{#
  Current state per customer key (id, cust_name) from the raw change log: the change
  with the greatest ordering value wins, deletes stay as rows. An incremental run reads
  only the recent raw changes and writes a key only when its winner is newer than the
  stored row; the shared rules (which raw rows a run reads, which change wins, when it
  replaces the stored row) are in macros/staging/current_state.sql.
  A live customer whose e-mail or registration date breaks a rule is kept and flagged
  in quality_issues (macros/quality/quality_issues.sql).
  On Athena, Iceberg buckets on the partition key keep a merge's writes under
  Athena's 100-partition limit.
#}
{{ config(
    unique_key=['id', 'cust_name'],
    incremental_strategy='merge',
    on_schema_change='append_new_columns',
    partitioned_by=athena_partitioning(['bucket(id, 16)'])
) }}

with changes as (
    select * from {{ source('dynamodb', 'customers_changes') }}
    {{ raw_changes_this_run_reads() }}
),

ranked as (
    select
        changes.*,
        row_number() over (
            partition by changes.id, changes.cust_name
            order by {{ latest_change_first('changes') }}
        ) as change_rank
    from changes
),

latest as (
    select * from ranked
    where change_rank = 1
),

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
    {{ change_metadata_columns_of('cleaned') }},
    -- A deleted customer has no business fields left to check.
    case when not cleaned.is_deleted then {{ customer_quality_issues('cleaned') }} end as quality_issues
from cleaned
{%- if is_incremental() %}
left join {{ this }} as existing
    on cleaned.id = existing.id and cleaned.cust_name = existing.cust_name
where {{ is_newer_than_existing('cleaned', 'existing') }}
{%- endif %}
