{#
  Invoiced amount per tenant, day and currency (amounts never mix currencies), from the
  current state of the app table's invoices: the invoices that are not deleted and
  whose status is ISSUED or PAID. A DRAFT is not invoiced yet and a VOID invoice was
  cancelled, so neither counts; an invoice counts on the day it was issued (issued_at,
  UTC), whatever its later status changes. The tenant is the partition key's id
  (pk = TENANT#<tenant id>). An invoice whose pk lacks the prefix, or whose issued_at
  is missing or not ISO-8601, is counted with a null tenant_id or invoice_date (warn
  tests name them), not dropped; one whose amount does not fit the contract's cast is
  counted, its amount not summed, and flagged (flagged_invoice_count).
#}
{%- set tenant_prefix = 'TENANT#' %}
{{ config(partitioned_by=athena_partitioning(['month(invoice_date)'])) }}

with invoices as (
    select * from {{ ref('stg_dynamodb__app_invoices') }}
),

invoiced as (
    select
        case
            when pk like '{{ tenant_prefix }}%' then substr(pk, {{ tenant_prefix | length + 1 }})
        end as tenant_id,
        cast(issued_at as date) as invoice_date,
        upper(trim(currency)) as currency,
        amount,
        quality_issues
    from invoices
    where not is_deleted
        and upper(trim(status)) in ('ISSUED', 'PAID')
)

select
    {{ from_contract('app_invoices', 'pk', 'tenant_id') }} as tenant_id,
    invoice_date,
    {{ from_contract('app_invoices', 'currency', 'currency') }} as currency,
    count(*) as invoice_count,
    count(quality_issues) as flagged_invoice_count,
    sum(amount) as invoiced_amount
from invoiced
group by tenant_id, invoice_date, currency
