[#
  stg_dynamodb__<raw_table>: the current state of a raw table, one row per key.

  The hand-written stg_dynamodb__customers and stg_dynamodb__orders are this model with
  their own `cleaned` step and final select; their config, the `changes`, `ranked` and
  `latest` steps and the incremental join are this template's, rendered for their
  contract (tests/dbt/test_scaffold.py compares them). What they do differently:
  - customers: trims the name into customer_name, lower-cases and checks the e-mail
    (is_email_valid, email_domain), and flags rows by customer_quality_issues;
  - orders: keys an order as order_key (not item_key), reads seed order_statuses
    (a `status_codes` step and a join), upper-cases status and currency, keeps the
    receipt digest as hex, and flags rows by order_quality_issues (is_amount_valid);
  - both keep a column's text as <column>_text before its typed value, and leave out
    the attributes no model reads (attachment_checksums).
#]
{#
[% filter paragraph %][% include "editable.txt" %][% endfilter %]

[% filter paragraph %]
Current state of [[ who(contract) ]]: one row per key ([[ contract.key_columns | join(', ') ]]) from the raw
change log, the change with the greatest ordering value, deletes kept as rows (is_deleted). The rules it
shares with every current-state model (which raw rows a run reads, which change wins, when it replaces the
stored row) are in macros/staging/current_state.sql. Columns with a contract `cast:` are typed by
typed_by_contract, exact or null, a map field's in a column of its own (<column>__<field>).
[% if typed(contract) or map_field_casts(contract) %]
A value that does not fit its cast becomes null, its text stays in <column>_text, and the live row is
flagged in quality_issues (macros/quality/quality_issues.sql).
[% endif %]
[% if merge_keys(contract) != contract.key_columns | list %]
A typed number key keeps its text in <key>_text, which the merge matches on.
[% endif %]
Attributes the contract does not name stay in _extra_attributes (DynamoDB JSON, by path).
PII in clear: staging is restricted.
[% endfilter %]
#}
[% set keys = contract.key_columns %]
[% set typed = typed(contract) %]
[% set fields_typed = map_field_casts(contract) %]
[% set merge_keys = merge_keys(contract) %]
{{ config(
    unique_key=[[ merge_keys | sql_list ]],
    incremental_strategy='merge',
    on_schema_change='append_new_columns',
    partitioned_by=athena_partitioning(['bucket([[ merge_keys[0] ]], 16)'])
) }}

with changes as (
    select * from {{ source('[[ source_name ]]', '[[ contract.changes_table ]]') }}
    {{ raw_changes_this_run_reads() }}
),

ranked as (
    select
        changes.*,
        row_number() over (
            partition by [% for key in keys %]changes.[[ key ]][[ ', ' if not loop.last ]][% endfor %]

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
[% for key in keys %]
[% if key in typed %]
        {{ typed_by_contract('[[ contract.raw_table ]]', '[[ key ]]') }} as [[ key ]],
        [[ key ]] as [[ key ]]_text,
[% else %]
        [[ key ]],
[% endif %]
[% endfor %]
        {{ composite_key([[ keys | sql_list ]]) }} as item_key,
[% for column in non_key_columns(contract) %]
[% if column in typed %]
        {{ typed_by_contract('[[ contract.raw_table ]]', '[[ column ]]') }} as [[ column ]],
        [[ column ]] as [[ column ]]_text,
[% else %]
        [[ column ]],
[% endif %]
[% for field in fields_typed.get(column, []) %]
        {{ typed_by_contract('[[ contract.raw_table ]]', '[[ field.path ]]', 'latest.[[ field.path ]]') }} as [[ field.column ]],
        latest.[[ field.path ]] as [[ field.column ]]_text,
[% endfor %]
[% endfor %]
        _extra_attributes,
        {{ change_metadata_columns() }}
    from latest
)

select
[% for key in keys %]
    cleaned.[[ key ]],
[% if key in typed %]
    cleaned.[[ key ]]_text,
[% endif %]
[% endfor %]
    cleaned.item_key,
[% for column in non_key_columns(contract) %]
    cleaned.[[ column ]],
[% if column in typed %]
    cleaned.[[ column ]]_text,
[% endif %]
[% for field in fields_typed.get(column, []) %]
    cleaned.[[ field.column ]],
    cleaned.[[ field.column ]]_text,
[% endfor %]
[% endfor %]
    cleaned._extra_attributes,
[% if typed or fields_typed %]
    {{ change_metadata_columns_of('cleaned') }},
    -- A deleted item has no attributes left to check.
    case
        when not cleaned.is_deleted
            then {{ quality_issues(contract_cast_issues('[[ contract.raw_table ]]', 'cleaned')) }}
    end as quality_issues
[% else %]
    {{ change_metadata_columns_of('cleaned') }}
[% endif %]
from cleaned
{%- if is_incremental() %}
left join {{ this }} as existing
    on [% for key in merge_keys %]cleaned.[[ key ]] = existing.[[ key ]][[ ' and ' if not loop.last ]][% endfor %]

where {{ is_newer_than_existing('cleaned', 'existing') }}
{%- endif %}
