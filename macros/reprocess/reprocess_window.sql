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
