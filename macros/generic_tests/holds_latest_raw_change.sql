{#
  Every staged key carries the greatest ordering value the raw change log holds for
  it: a newer change lost by an incremental run (e.g. ingested before the lookback
  window) shows up as a failing row.

  Declared with `config: {where: __changed_rows_only__}`, on an incremental build
  (macros/tests/changed_rows_only.sql) the test reads raw only where that build read
  it, the partitions after its cutoff, so that its cost grows with the new data, not
  with the log. It then checks what the build could have got
  wrong: every key with a raw change the build read has a staged row at least as new
  as the newest of those changes, and every staged row the build could have written
  (_ingested_at after the cutoff) is one of the raw changes it read. A stored row
  that went wrong outside any build, or a change that landed before the lookback
  window, is found only by the full check (--full-refresh, `dbt test`, or var
  full_data_tests: run one regularly, e.g. nightly). The cutoff is a literal on every
  target (changed_rows_cutoff), so Athena prunes the `_ingest_hour` partitions too.

  `staged_key_columns` names the model's columns holding the keys as raw has them, in
  the order of `key_columns`, where they differ: a number key the model types keeps its
  raw text in `<key>_text`.
#}
{% test holds_latest_raw_change(model, raw_table, key_columns, staged_key_columns=none) %}
{%- set cutoff = changed_rows_cutoff(as_literal=true) -%}
{%- set key_list = key_columns | join(', ') -%}
{%- set staged_keys = staged_key_columns or key_columns -%}
{%- if cutoff is none %}
with latest_raw as (
    select
        {{ key_list }},
        max(_ordering_value) as max_ordering_value
    from {{ source('dynamodb', raw_table) }}
    group by {{ key_list }}
)

select
    {% for key in key_columns %}latest_raw.{{ key }}, {% endfor %}
    latest_raw.max_ordering_value,
    staged._ordering_value as staged_ordering_value
from latest_raw
left join {{ model }} as staged
    on {% for key in key_columns %}latest_raw.{{ key }} = staged.{{ staged_keys[loop.index0] }}{% if not loop.last %} and {% endif %}{% endfor %}
where staged._ordering_value is null
    or staged._ordering_value <> latest_raw.max_ordering_value
{%- else %}
with raw_read as (
    -- The raw changes the build read: the same filter as raw_changes_this_run_reads,
    -- so a reader prunes the same partitions.
    select {{ key_list }}, _ordering_value
    from {{ source('dynamodb', raw_table) }}
    where _ingested_at > {{ cutoff }}
        and _ingest_hour >= {{ ingest_hour_of(cutoff) }}
),

latest_read as (
    select {{ key_list }}, max(_ordering_value) as max_ordering_value
    from raw_read
    group by {{ key_list }}
),

staged_written as (
    select {% for key in key_columns %}staged_change.{{ staged_keys[loop.index0] }} as {{ key }}, {% endfor %}_ordering_value
    from {{ model }} as staged_change
    where {{ changed_rows_condition('staged_change') }}
)

select
    {% for key in key_columns %}latest_read.{{ key }}, {% endfor %}
    latest_read.max_ordering_value,
    staged._ordering_value as staged_ordering_value
from latest_read
left join {{ model }} as staged
    on {% for key in key_columns %}latest_read.{{ key }} = staged.{{ staged_keys[loop.index0] }}{% if not loop.last %} and {% endif %}{% endfor %}
where staged._ordering_value is null
    or staged._ordering_value < latest_read.max_ordering_value

union all

select
    {% for key in key_columns %}staged_written.{{ key }}, {% endfor %}
    cast(null as varchar) as max_ordering_value,
    staged_written._ordering_value as staged_ordering_value
from staged_written
where not exists (
    select 1
    from raw_read
    where {% for key in key_columns %}raw_read.{{ key }} = staged_written.{{ key }} and {% endfor %}raw_read._ordering_value = staged_written._ordering_value
)
{%- endif %}
{% endtest %}
