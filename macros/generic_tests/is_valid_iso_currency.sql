{# ISO-4217 alphabetic code (is_iso_currency_code); a null passes (not_null checks it). #}
{% test is_valid_iso_currency(model, column_name) %}
select {{ column_name }}
from {{ model }}
where {{ column_name }} is not null
  and not {{ is_iso_currency_code(column_name) }}
{% endtest %}
