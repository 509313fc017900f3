{#
  Makes every `dynamodb` source a relation in schema `raw` on DuckDB, before any
  model runs: unit tests and `source()` need a real relation, not an external path.
  raw_format=parquet: a view over <raw dir>/<table>/_batch_id=<n>/*.parquet (the local
  sink; <raw dir> is $LAKEHOUSE_RAW_DIR, else <data>/raw), or an empty typed view while a table has no files yet.
  raw_format=hudi: a view over raw_hudi.<table>, loaded by lakehouse_dbt.hudi_raw.
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
  {% for source_node in graph.sources.values() if source_node.source_name == 'dynamodb' %}
    {% set table = source_node.name %}
    {% set typed_columns = [] %}
    {% set null_columns = [] %}
    {% for column in source_node.columns.values() %}
      {% do typed_columns.append('cast(' ~ column.name ~ ' as ' ~ column.data_type ~ ') as ' ~ column.name) %}
      {% do null_columns.append('cast(null as ' ~ column.data_type ~ ') as ' ~ column.name) %}
    {% endfor %}
    {% if var('raw_format') == 'hudi' %}
      {% set body = 'select ' ~ typed_columns | join(', ') ~ ' from raw_hudi.' ~ table %}
    {% else %}
      {% set pattern = raw_dir ~ '/' ~ table ~ '/*/*.parquet' %}
      {% set file_count = run_query("select count(*) from glob('" ~ pattern ~ "')").columns[0].values()[0] %}
      {% if file_count > 0 %}
        {% set body = 'select ' ~ typed_columns | join(', ') ~ " from read_parquet('" ~ pattern
            ~ "', hive_partitioning = true, union_by_name = true, hive_types = {'_batch_id': 'BIGINT'})" %}
      {% else %}
        {% set body = 'select ' ~ null_columns | join(', ') ~ ' where false' %}
      {% endif %}
    {% endif %}
    {% do statements.append('create or replace view raw.' ~ table ~ ' as ' ~ body) %}
  {% endfor %}
  {{ return(statements | join(';\n')) }}
{% endmacro %}
