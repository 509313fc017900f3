{#
  The one text key of a row whose identity is several columns (a DynamoDB partition
  key and sort key, or an order key and a line number): each part with `\` and `|`
  escaped by a backslash, the parts joined by `|`. Every model and macro that makes
  one key of several columns calls this, so that no two of them can differ.

  Why escaped: a plain join mixes keys up whatever the separator, since DynamoDB key
  values may hold any character, and `#` is common in them (single-table designs key
  items like `CUSTOMER#42`): ('a#b', 'c') and ('a', 'b#c') both joined by `#` are
  `a#b#c`. Escaped, each key text has exactly one reading ('a|b', 'c' -> `a\|b|c`,
  'a', 'b|c' -> `a|b\|c`), and a key without `|` or `\` reads as it is (`c1|o1`).

  The same SQL on DuckDB and Athena (replace() replaces every occurrence on both, and
  a backslash in a string literal is a plain character on both), so both targets give
  the same text. Parts must be text: cast a number first (an integer's text is the
  same on both engines). A null part makes the key null, which the keys' not_null
  tests report.
#}
{% macro composite_key(parts) -%}
  {%- set escaped = [] -%}
  {%- for part in parts -%}
    {%- do escaped.append("replace(replace(" ~ part ~ ", '\\', '\\\\'), '|', '\\|')") -%}
  {%- endfor -%}
  {{ escaped | join(" || '|' || ") }}
{%- endmacro %}
