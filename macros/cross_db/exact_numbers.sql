{#
  DynamoDB numbers land in raw as their exact text (up to 38 significant digits,
  exponents from -130 to +125). These macros type them for staging without rounding:
  the "fits exactly" decision is made on the text itself (digits and exponent), never
  through a cast, since every cast rounds the digits its type cannot hold (a
  decimal(38, 10) comparison saw 1.00000000001 as 1.00 and -1E-130 as 0.00).
  A value that does not fit is null; the models flag it (is_<column>_valid).
#}

{# Decimal text -> decimal(precision, scale), null unless the value fits exactly. #}
{% macro exact_decimal(expr, precision, scale) -%}
  {%- set number = exact_number_parts(expr) -%}
  {#- value * 10^scale as digits: a whole number of at most `precision` digits when it fits. -#}
  {#- Clamped to 0..precision, so no row can ask for a huge string, whatever the engine evaluates. -#}
  {%- set scaled_digits = "rpad(" ~ number.significant ~ ", cast(least(greatest(length(" ~ number.significant
      ~ ") + " ~ number.last_digit_exponent ~ " + " ~ scale ~ ", 0), " ~ precision ~ ") as integer), '0')" -%}
  {#- Zero-padded to precision + 1 digits, so the decimal point goes at a fixed place. -#}
  {%- set padded = "lpad(" ~ scaled_digits ~ ", " ~ (precision + 1) ~ ", '0')" -%}
  {#- The grammar of streaming/pipeline/decode.py NUMBER_PATTERN: anything else is not a number. -#}
  case
    when not {{ regex_matches(expr, '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$') }} then null
    when {{ number.significant }} = '' then cast('0' as decimal({{ precision }}, {{ scale }}))
    when {{ number.last_digit_exponent }} + {{ scale }} >= 0
      and length({{ number.significant }}) + {{ number.last_digit_exponent }} <= {{ precision - scale }}
      then cast(
        {{ number.sign }} || substr({{ padded }}, 1, {{ precision + 1 - scale }})
        {%- if scale > 0 %} || '.' || substr({{ padded }}, {{ precision + 2 - scale }}){% endif %}
        as decimal({{ precision }}, {{ scale }})
      )
  end
{%- endmacro %}

{# Number text -> bigint, null unless it is a whole number within bigint's range
   (1.5 is null, not 2; 1E+2 and 100.0 are 100). #}
{% macro exact_bigint(expr) -%}
  try_cast({{ exact_decimal(expr, 38, 0) }} as bigint)
{%- endmacro %}

{#
  SQL fragments over the text of a number (callers check its grammar first):
  - sign: '-' or '';
  - significant: its digits without leading and trailing zeros ('' for zero);
  - last_digit_exponent: the power of ten of the last significant digit, so the value
    is sign * significant * 10^last_digit_exponent; null when the exponent has more
    than 10 characters (DynamoDB's stay within -130..+125), which also keeps the
    arithmetic far from bigint overflow.
#}
{% macro exact_number_parts(expr) %}
  {%- set mantissa = "regexp_replace(" ~ expr ~ ", '[eE].*$', '')" -%}
  {%- set digits = regex_replace_all(mantissa, '[^0-9]', '') -%}
  {%- set without_leading_zeros = "regexp_replace(" ~ digits ~ ", '^0+', '')" -%}
  {%- set significant = "regexp_replace(" ~ without_leading_zeros ~ ", '0+$', '')" -%}
  {%- set fraction_length = "(case when strpos(" ~ mantissa ~ ", '.') > 0 then length(" ~ mantissa
      ~ ") - strpos(" ~ mantissa ~ ", '.') else 0 end)" -%}
  {#- The exponent without a '+', which not every engine's text-to-bigint cast takes. -#}
  {%- set exponent_text = "regexp_replace(" ~ expr ~ ", '^[^eE]*([eE][+]?|$)', '')" -%}
  {%- set exponent = "(case when " ~ exponent_text ~ " = '' then 0 when length(" ~ exponent_text
      ~ ") <= 10 then try_cast(" ~ exponent_text ~ " as bigint) end)" -%}
  {%- set last_digit_exponent = "(" ~ exponent ~ " - " ~ fraction_length ~ " + length(" ~ without_leading_zeros
      ~ ") - length(" ~ significant ~ "))" -%}
  {{ return({
      'sign': "(case when " ~ expr ~ " like '-%' then '-' else '' end)",
      'significant': significant,
      'last_digit_exponent': last_digit_exponent,
  }) }}
{% endmacro %}

{# regexp_replace of every match: DuckDB replaces the first one unless told 'g'. #}
{% macro regex_replace_all(expr, pattern, replacement) %}
  {{ return(adapter.dispatch('regex_replace_all', 'dynamodb_lakehouse')(expr, pattern, replacement)) }}
{% endmacro %}
{% macro default__regex_replace_all(expr, pattern, replacement) -%}
  regexp_replace({{ expr }}, '{{ pattern }}', '{{ replacement }}', 'g')
{%- endmacro %}
{% macro athena__regex_replace_all(expr, pattern, replacement) -%}
  regexp_replace({{ expr }}, '{{ pattern }}', '{{ replacement }}')
{%- endmacro %}
