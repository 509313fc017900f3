{#
  Makes every `dynamodb` source a relation in schema `raw` on DuckDB, before any
  model runs: unit tests and `source()` need a real relation, not an external path.
  Change logs (`<table>_changes`):
    raw_format=parquet: a view over <raw dir>/<table>_changes/_ingest_hour=<h>/_batch_id=<n>/*.parquet
    (the local sink; <raw dir> is $LAKEHOUSE_RAW_DIR, else <data>/raw), or an empty typed
    view while a table has no files yet.
    raw_format=hudi: a view over raw_hudi.<table>_changes, loaded by lakehouse_dbt.hudi_raw.
  Current state (sources with meta.change_log): a view keeping, per meta.key_columns,
  the change with the greatest _ordering_value (ties: greatest _event_id), tombstones
  included: the rows the production Hudi upsert table holds, derived instead of stored.
  On Athena the sources are the Glue tables themselves: nothing to do.
#}
{% macro register_raw_sources() %}
  {{ return(adapter.dispatch('register_raw_sources', 'dynamodb_lakehouse')()) }}
{% endmacro %}

{% macro default__register_raw_sources() %}
  select 1
{% endmacro %}

{% macro duckdb__register_raw_sources() %}
  {% if not execute %}{{ return('select 1') }}{% endif %}
  {% set data_dir = env_var('LAKEHOUSE_DATA_DIR', 'data') %}
  {# After `lakehouse switch`, LAKEHOUSE_RAW_DIR names the active raw folder. #}
  {% set raw_dir = env_var('LAKEHOUSE_RAW_DIR', data_dir ~ '/raw') %}
  {% set statements = ['create schema if not exists raw'] %}
  {% set sources = graph.sources.values() | selectattr('source_name', 'equalto', 'dynamodb') | list %}
  {% for source_node in sources if not source_node.meta.change_log %}
    {% set table = source_node.name %}
    {% if var('raw_format') == 'hudi' %}
      {% set relation = 'raw_hudi.' ~ table %}
    {% else %}
      {% set pattern = raw_dir ~ '/' ~ table ~ '/_ingest_hour=*/_batch_id=*/*.parquet' %}
      {% set file_count = run_query("select count(*) from glob('" ~ pattern ~ "')").columns[0].values()[0] %}
      {% set relation = "read_parquet('" ~ pattern ~ "', hive_partitioning = true, union_by_name = true,"
          ~ " hive_types = {'_batch_id': 'BIGINT', '_ingest_hour': 'VARCHAR'})" if file_count > 0 else none %}
    {% endif %}
    {#
      A declared column no file has yet (a table with no files, or an attribute added to
      the contract after the files were written) reads as null: the contract evolution rule.
    #}
    {% set present = [] %}
    {% if relation is not none %}
      {% set present = run_query('select column_name from (describe select * from ' ~ relation ~ ')').columns[0].values() %}
    {% endif %}
    {% set columns = [] %}
    {% for column in source_node.columns.values() %}
      {% set value = column.name if column.name in present else 'null' %}
      {% do columns.append('cast(' ~ value ~ ' as ' ~ column.data_type ~ ') as ' ~ column.name) %}
    {% endfor %}
    {# Columns of an attribute added to the contract but not (yet) to this YAML pass
       through as they are, as the Hudi catalog sync adds them to the Glue table. #}
    {% for name in present if name not in source_node.columns %}
      {% do columns.append('"' ~ name ~ '"') %}
    {% endfor %}
    {% if relation is not none %}
      {% set body = 'select ' ~ columns | join(', ') ~ ' from ' ~ relation %}
    {% else %}
      {% set body = 'select ' ~ columns | join(', ') ~ ' where false' %}
    {% endif %}
    {% do statements.append('create or replace view raw.' ~ table ~ ' as ' ~ body) %}
  {% endfor %}
  {% for source_node in sources if source_node.meta.change_log %}
    {% set keys = source_node.meta.key_columns | join(', ') %}
    {% do statements.append(
        'create or replace view raw.' ~ source_node.name ~ ' as select * exclude (_ingest_hour) from raw.'
        ~ source_node.meta.change_log ~ ' qualify row_number() over (partition by ' ~ keys
        ~ ' order by _ordering_value desc, _event_id desc) = 1') %}
  {% endfor %}
  {{ return(statements | join(';\n')) }}
{% endmacro %}
