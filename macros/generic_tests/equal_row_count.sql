{# Fails when the model and compare_model (optionally filtered) differ in row count. #}
{% test equal_row_count(model, compare_model, compare_where='1 = 1') %}
with counts as (
    select
        (select count(*) from {{ model }}) as model_rows,
        (select count(*) from {{ compare_model }} where {{ compare_where }}) as compare_rows
)

select model_rows, compare_rows
from counts
where model_rows <> compare_rows
{% endtest %}
