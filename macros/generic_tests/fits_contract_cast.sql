{#
  A value sent for a column with a contract `cast:` that does not fit it: typed_by_contract
  made the column null while its text, kept as received in `<column>_text`, is not
  (macros/contracts/typed_by_contract.sql). The row stays and is flagged
  `<column>_invalid` in quality_issues (macros/quality/quality_issues.sql); this test,
  declared with severity warn on every cast column of the staging models, makes each such
  column a warning of the build that names it. The same SQL on DuckDB and Athena.
#}
{% test fits_contract_cast(model, column_name) %}
select {{ column_name }}_text as value_received
from {{ model }}
where {{ column_name }} is null
  and {{ column_name }}_text is not null
{% endtest %}
