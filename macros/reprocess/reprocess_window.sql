{#
  The [reprocess_from, reprocess_to) range of vars reprocess_from/reprocess_to, as
  {'start': date, 'end': date}, or none when neither is set. Half a range, a value
  that is not an ISO date or an empty range stops the run: reprocessing the wrong
  range silently would be worse than not reprocessing.
#}
{% macro reprocess_window() %}
  {%- set start_text = var('reprocess_from') -%}
  {%- set end_text = var('reprocess_to') -%}
  {%- if start_text is none and end_text is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- if start_text is none or end_text is none -%}
    {{ exceptions.raise_compiler_error("set both vars reprocess_from and reprocess_to, or neither") }}
  {%- endif -%}
  {%- set parsed = [] -%}
  {%- for text in [start_text, end_text] -%}
    {%- set day = modules.re.fullmatch('[0-9]{4}-[0-9]{2}-[0-9]{2}', text | string) -%}
    {%- if not day -%}
      {{ exceptions.raise_compiler_error("reprocess_from/reprocess_to must be ISO dates (YYYY-MM-DD), got: " ~ text) }}
    {%- endif -%}
    {%- do parsed.append(modules.datetime.date.fromisoformat(text | string)) -%}
  {%- endfor -%}
  {%- if parsed[0] >= parsed[1] -%}
    {{ exceptions.raise_compiler_error("reprocess_from must be before reprocess_to (end exclusive)") }}
  {%- endif -%}
  {{ return({'start': parsed[0], 'end': parsed[1]}) }}
{% endmacro %}

{#
  The condition that timestamp column `event_ts_column` lies in the reprocess range,
  [reprocess_from, reprocess_to) at midnight UTC: the one place the range becomes SQL,
  for every model that re-reads, replaces or deletes the rows of a reprocess run.
  Only called on a reprocess run (reprocess_window() is not none).
#}
{% macro in_reprocess_window(event_ts_column) -%}
  {%- set window = reprocess_window() -%}
  {%- if window is none -%}
    {{ exceptions.raise_compiler_error("in_reprocess_window: vars reprocess_from/reprocess_to are not set") }}
  {%- endif -%}
  {{ event_ts_column }} >= timestamp '{{ window.start }} 00:00:00'
        and {{ event_ts_column }} < timestamp '{{ window.end }} 00:00:00'
{%- endmacro %}
