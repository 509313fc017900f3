{#
  Every staged key carries the greatest ordering value the raw change log holds for
  it: a newer change lost by an incremental run (e.g. ingested before the lookback
  window) shows up as a failing row. On an incremental build
  (macros/tests/changed_rows_only.sql) only the keys that build touched are compared:
  those of the staged rows it could have written and of the raw changes it read, each
  against all of its raw changes; a change that landed before the lookback window is
  then found only by the full check.
#}
{% test holds_latest_raw_change(model, raw_table, key_columns) %}
{%- set staged_window = changed_rows_condition('staged_change') -%}
{%- set raw_window = changed_rows_condition('raw_change') -%}
with
{%- if staged_window is not none %}
touched_keys as (
    select {{ key_columns | join(', ') }}
    from {{ model }} as staged_change
    where {{ staged_window }}
    union
    select {{ key_columns | join(', ') }}
    from {{ source('dynamodb', raw_table) }} as raw_change
    where {{ raw_window }}
),
{%- endif %}

latest_raw as (
    select
        {% for key in key_columns %}raw_change.{{ key }}, {% endfor %}
        max(raw_change._ordering_value) as max_ordering_value
    from {{ source('dynamodb', raw_table) }} as raw_change
    {%- if staged_window is not none %}
    inner join touched_keys
        on {% for key in key_columns %}raw_change.{{ key }} = touched_keys.{{ key }}{% if not loop.last %} and {% endif %}{% endfor %}
    {%- endif %}
    group by {% for key in key_columns %}raw_change.{{ key }}{{ ', ' if not loop.last }}{% endfor %}
)

select
    {% for key in key_columns %}latest_raw.{{ key }}, {% endfor %}
    latest_raw.max_ordering_value,
    staged._ordering_value as staged_ordering_value
from latest_raw
left join {{ model }} as staged
    on {% for key in key_columns %}latest_raw.{{ key }} = staged.{{ key }}{% if not loop.last %} and {% endif %}{% endfor %}
where staged._ordering_value is null
    or staged._ordering_value <> latest_raw.max_ordering_value
{% endtest %}
