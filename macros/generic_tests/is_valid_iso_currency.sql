{# ISO-4217 alphabetic code: three upper-case letters. #}
{% test is_valid_iso_currency(model, column_name) %}
select {{ column_name }}
from {{ model }}
where {{ column_name }} is not null
  and not {{ regex_matches(column_name, '^[A-Z]{3}$') }}
{% endtest %}
