{#
  Makes every `dynamodb` source a relation in schema `raw` on DuckDB, before any
  model runs: unit tests and `source()` need a real relation, not an external path.
  Change logs (`<table>_changes`):
    raw_format=parquet: a view over <raw dir>/<table>_changes/_ingest_hour=<h>/_batch_id=<n>/*.parquet
    (the local sink; <raw dir> is $LAKEHOUSE_RAW_DIR, else <data>/raw), or an empty typed
    view while a table has no files yet.
    raw_format=hudi: a view over raw_hudi.<table>_changes, loaded by lakehouse_dbt.hudi_raw (an
    empty typed view for a table it did not load). A table hudi-rs could not read (listed in
    raw_hudi._unreadable) gets no view, nor does the current state derived from it: the
    models reading it fail by name, and every other table builds.
  Current state (sources with meta.change_log):
    raw_format=hudi with raw_hudi.<table> loaded: a view over that current-state Hudi table,
    the upsert table Athena reads, in the change log's columns (but _ingest_hour).
    Otherwise: a view keeping, per meta.key_columns, the change latest_change_first() puts
    first (the greatest _ordering_value), tombstones included: the rows the Hudi upsert
    table holds, derived instead of stored.
  Hudi's meta columns (_hoodie_commit_time, ...) stay out of every view: Athena's Glue
  tables have them, but no model reads them and the Parquet views have none.
  On Athena the sources are the Glue tables themselves: nothing to do.
#}
{% macro register_raw_sources() %}
  {{ return(adapter.dispatch('register_raw_sources', 'dynamodb_lakehouse')()) }}
{% endmacro %}

{% macro default__register_raw_sources() %}
  select 1
{% endmacro %}

{# `text` as a DuckDB string literal. #}
{% macro duckdb__sql_string(text) %}
  {{ return("'" ~ text | replace("'", "''") ~ "'") }}
{% endmacro %}

{#
  `path` as a DuckDB glob matching exactly that path: DuckDB's file readers expand `*`,
  `?` and `[...]` in every path they get, a list of file names included, so a data
  directory named `da[t]a` would read `data`. Each of them goes into a character class
  of its own (`[` first, as the others' classes add more); braces are literal to DuckDB.
  streaming/io/duckdb_files.py does the same for the Python readers.
#}
{% macro duckdb__glob_literal(path) %}
  {{ return(path | replace('[', '[[]') | replace('*', '[*]') | replace('?', '[?]')) }}
{% endmacro %}

{#
  The read_parquet call of a change log's files. DuckDB reads the Parquet footer of
  every file that union_by_name must merge each time a query binds the view: the
  bytes of an incremental build would then grow with the number of files, not with
  the new data. So the footers' schemas are recorded once per file in
  raw.parquet_file_schemas (keyed by path, size and modification time: a rewritten
  batch is read again), and while every file of the log has the same schema, the view
  reads the glob without union_by_name: DuckDB then binds on the first file alone,
  and a query reads only the files its `_ingest_hour` filter keeps. Only a log whose
  files differ (an attribute added to the contract after older files were written)
  needs union_by_name, which reads a missing column as null.
#}
{% macro duckdb__raw_change_log_relation(table, pattern) %}
  {%- set hive_options = "hive_partitioning = true, hive_types = {'_batch_id': 'BIGINT', '_ingest_hour': 'VARCHAR'}" -%}
  {%- set listing = "read_blob(" ~ duckdb__sql_string(pattern) ~ ")" -%}
  {%- do run_query(
      "create table if not exists raw.parquet_file_schemas (table_name varchar, path varchar, size bigint,"
      ~ " last_modified timestamptz, schema_signature varchar);"
      ~ " delete from raw.parquet_file_schemas as recorded where table_name = '" ~ table ~ "' and not exists ("
      ~ "select 1 from " ~ listing ~ " as listed where listed.filename = recorded.path"
      ~ " and listed.size = recorded.size and listed.last_modified = recorded.last_modified)") -%}
  {%- set unrecorded = run_query(
      "select listed.filename from " ~ listing ~ " as listed where not exists (select 1 from raw.parquet_file_schemas"
      ~ " as recorded where recorded.table_name = '" ~ table ~ "' and recorded.path = listed.filename)"
      ).columns[0].values() | list -%}
  {%- if unrecorded -%}
    {%- set literals = [] -%}
    {%- for path in unrecorded -%}
      {%- do literals.append(duckdb__sql_string(duckdb__glob_literal(path))) -%}
    {%- endfor -%}
    {%- set files = "[" ~ literals | join(", ") ~ "]" -%}
    {%- do run_query(
        "insert into raw.parquet_file_schemas select '" ~ table ~ "', listed.filename, listed.size, listed.last_modified,"
        ~ " footer.schema_signature from read_blob(" ~ files ~ ") as listed inner join ("
        ~ " select file_name, string_agg(concat_ws(' ', name, type, repetition_type, converted_type, logical_type,"
        ~ " num_children), '; ' order by ordinality) as schema_signature"
        ~ " from parquet_schema(" ~ files ~ ") with ordinality group by file_name"
        ~ ") as footer on footer.file_name = listed.filename") -%}
  {%- endif -%}
  {%- set schemas = run_query("select count(distinct schema_signature) from raw.parquet_file_schemas where table_name = '"
        ~ table ~ "'").columns[0].values()[0] -%}
  {%- set union_option = '' if schemas == 1 else ', union_by_name = true' -%}
  {{ return("read_parquet(" ~ duckdb__sql_string(pattern) ~ ", " ~ hive_options ~ union_option ~ ")") }}
{% endmacro %}

{# Whether DuckDB holds the table raw_hudi.<table> (lakehouse_dbt.hudi_raw loaded it). #}
{% macro duckdb__hudi_table_loaded(table) %}
  {{ return(run_query("select count(*) from information_schema.tables where table_schema = 'raw_hudi'"
                      ~ " and table_name = " ~ duckdb__sql_string(table)).columns[0].values()[0] > 0) }}
{% endmacro %}

{# The tables lakehouse_dbt.hudi_raw could not read in its last load (none before it ran). #}
{% macro duckdb__unreadable_hudi_tables() %}
  {% set listed = run_query("select count(*) from information_schema.tables where table_schema = 'raw_hudi'"
                            ~ " and table_name = '_unreadable'").columns[0].values()[0] > 0 %}
  {{ return(run_query('select table_name from raw_hudi._unreadable').columns[0].values() | list if listed else []) }}
{% endmacro %}

{#
  The select list of a raw view over `relation` (none: no data yet) in the columns a
  source declares, but those in `skipped`. A declared column the relation lacks (a table
  with no files, or an attribute added to the contract after the files were written)
  reads as null: the contract evolution rule. Columns of an attribute added to the
  contract but not (yet) to the YAML pass through as they are, as the Hudi catalog sync
  adds them to the Glue table; Hudi's meta columns do not.
#}
{% macro duckdb__raw_columns(declared, relation, skipped=[]) %}
  {% set present = [] %}
  {% if relation is not none %}
    {% set present = run_query('select column_name from (describe select * from ' ~ relation ~ ')').columns[0].values() %}
  {% endif %}
  {% set columns = [] %}
  {% for column in declared.values() if column.name not in skipped %}
    {% set value = column.name if column.name in present else 'null' %}
    {% do columns.append('cast(' ~ value ~ ' as ' ~ column.data_type ~ ') as ' ~ column.name) %}
  {% endfor %}
  {% for name in present if name not in declared and name not in skipped and not name.startswith('_hoodie_') %}
    {% do columns.append('"' ~ name ~ '"') %}
  {% endfor %}
  {{ return(columns | join(', ')) }}
{% endmacro %}

{% macro duckdb__register_raw_sources() %}
  {% if not execute %}{{ return('select 1') }}{% endif %}
  {% set data_dir = env_var('LAKEHOUSE_DATA_DIR', 'data') %}
  {# After `lakehouse switch`, LAKEHOUSE_RAW_DIR names the active raw folder. #}
  {% set raw_dir = env_var('LAKEHOUSE_RAW_DIR', data_dir ~ '/raw') %}
  {% set statements = ['create schema if not exists raw'] %}
  {% do run_query('create schema if not exists raw') %}
  {% set sources = graph.sources.values() | selectattr('source_name', 'equalto', 'dynamodb') | list %}
  {% set unreadable = duckdb__unreadable_hudi_tables() if var('raw_format') == 'hudi' else [] %}
  {% for source_node in sources if not source_node.meta.change_log %}
    {% set table = source_node.name %}
    {% if table in unreadable %}
      {% do statements.append('drop view if exists raw.' ~ table) %}
    {% else %}
      {% if var('raw_format') == 'hudi' %}
        {# A table the loader did not load (no Hudi table of it yet, or no completed commit)
           reads as empty, as a change log without Parquet files does. #}
        {% set relation = 'raw_hudi.' ~ table if duckdb__hudi_table_loaded(table) else none %}
      {% else %}
        {% set pattern = duckdb__glob_literal(raw_dir) ~ '/' ~ table ~ '/_ingest_hour=*/_batch_id=*/*.parquet' %}
        {% set file_count = run_query("select count(*) from glob(" ~ duckdb__sql_string(pattern) ~ ")").columns[0].values()[0] %}
        {% set relation = duckdb__raw_change_log_relation(table, pattern) if file_count > 0 else none %}
      {% endif %}
      {% set columns = duckdb__raw_columns(source_node.columns, relation) %}
      {% if relation is not none %}
        {% set body = 'select ' ~ columns ~ ' from ' ~ relation %}
      {% else %}
        {% set body = 'select ' ~ columns ~ ' where false' %}
      {% endif %}
      {% do statements.append('create or replace view raw.' ~ table ~ ' as ' ~ body) %}
    {% endif %}
  {% endfor %}
  {% for source_node in sources if source_node.meta.change_log %}
    {% if source_node.name in unreadable or source_node.meta.change_log in unreadable %}
      {% do statements.append('drop view if exists raw.' ~ source_node.name) %}
    {% elif var('raw_format') == 'hudi' and duckdb__hudi_table_loaded(source_node.name) %}
      {% set change_log = sources | selectattr('name', 'equalto', source_node.meta.change_log) | first %}
      {% set relation = 'raw_hudi.' ~ source_node.name %}
      {% do statements.append(
          'create or replace view raw.' ~ source_node.name ~ ' as select '
          ~ duckdb__raw_columns(change_log.columns, relation, ['_ingest_hour']) ~ ' from ' ~ relation) %}
    {% else %}
      {% set keys = source_node.meta.key_columns | join(', ') %}
      {% do statements.append(
          'create or replace view raw.' ~ source_node.name ~ ' as select * exclude (_ingest_hour) from raw.'
          ~ source_node.meta.change_log ~ ' qualify row_number() over (partition by ' ~ keys
          ~ ' order by ' ~ latest_change_first() ~ ') = 1') %}
    {% endif %}
  {% endfor %}
  {{ return(statements | join(';\n')) }}
{% endmacro %}
