{#
  Every staged key carries the greatest ordering value the raw change log holds for
  it: a newer change lost by an incremental run (e.g. ingested before the lookback
  window) shows up as a failing row.
#}
{% test holds_latest_raw_change(model, raw_table, key_columns) %}
with latest_raw as (
    select
        {% for key in key_columns %}{{ key }}, {% endfor %}
        max(_ordering_value) as max_ordering_value
    from {{ source('dynamodb', raw_table) }}
    group by {{ key_columns | join(', ') }}
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
