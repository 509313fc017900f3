{#
  Data tests declared with `config: {where: __changed_rows_only__}` in the models'
  YAML check, on an incremental `dbt build`, only the rows that build could have
  written; a --full-refresh, var full_data_tests=true, a reprocess run (vars
  reprocess_from/reprocess_to) or any other command (`dbt test`) checks every row.
  A test without that where checks every row on every build.

  Why: an incremental run rewrites the keys of ~1% of the rows, but a test of the whole
  table reads all of it, so the tests cost more than the run itself. The rows no run
  rewrote were checked by the build that wrote them (or by the last full check).

  Which tests: those of the incremental models downstream of the raw change log (the
  staging models, int_orders__lines_unnested and the incremental marts); the
  placeholder belongs on no other model's tests, since the hook below reads
  max(_ingested_at) of every model a test declares it for. Every row such a model
  writes carries the _ingested_at of the staged change behind it, and a run writes
  only rows with an _ingested_at after its own cutoff, lookback_cutoff() = the newest
  _ingested_at in the table before the run, minus var raw_lookback_hours. The test
  needs that cutoff as it was BEFORE the run: the newest _ingested_at after the run is
  later, and the rows of a batch that landed late (the reason for the lookback) can
  lie between the two. So the on-run-start hook record_watermarks_for_data_tests
  keeps, per model this build selects that has such a test, the newest _ingested_at
  before anything runs, as literals in a view tagged with the invocation id; a test
  reads the record of its own invocation, and without one (the model was not built in
  this invocation, or its table did not exist) it checks every row. A reprocess run
  also writes rows with an old _ingested_at (changes whose event time is in the
  range): it checks every row.

  How a test is narrowed (get_where_subquery below, by the test's name):
  - unique, unique_combination: the rows whose key value has a row in the window, so
    that a key written by the run and duplicated by an older row is still found.
  - holds_latest_raw_change: narrows itself, to the raw partitions the run read and
    the staged rows in the window (macros/generic_tests).
  - any other test: the rows in the window. A row with a null _ingested_at is always
    in it: only a faulty run writes one, and not_null(_ingested_at) must see it.

  A late batch whose _ingested_at is older than the cutoff is never read by an
  incremental run, so only the full check (holds_latest_raw_change) can find it:
  run one regularly, e.g. nightly with --vars '{full_data_tests: true}'.
#}

{# The where value a test declares in YAML to be narrowed: `config: {where: __changed_rows_only__}`. #}
{% macro changed_rows_placeholder() %}__changed_rows_only__{% endmacro %}

{# The view of recorded watermarks, in the target's own schema. #}
{% macro data_test_watermarks_relation() %}
  {{ return(api.Relation.create(database=target.database, schema=target.schema,
                                identifier='data_test_watermarks', type='view')) }}
{% endmacro %}

{# True when this invocation's data tests may be narrowed (see above). `compile` too,
   so that the compiled tests show (and the Athena tests check) what a build runs. #}
{% macro data_tests_may_skip_unchanged_rows() %}
  {{ return(flags.WHICH in ['build', 'compile']
            and not flags.FULL_REFRESH
            and not var('full_data_tests')
            and reprocess_window() is none) }}
{% endmacro %}

{#
  on-run-start: the newest _ingested_at of every selected model that has a test with
  the placeholder and whose table exists, as a view of literals for this invocation's
  tests.
#}
{% macro record_watermarks_for_data_tests() %}
  {%- if not execute or flags.WHICH != 'build' or not data_tests_may_skip_unchanged_rows() -%}
    {{ return('select 1') }}
  {%- endif -%}
  {%- set narrowed_models = [] -%}
  {%- for test in graph.nodes.values()
        if test.resource_type == 'test' and test.config.get('where') == changed_rows_placeholder() -%}
    {%- do narrowed_models.append(test.attached_node) -%}
  {%- endfor -%}
  {%- set counted = [] -%}
  {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.unique_id in narrowed_models
           and node.unique_id in selected_resources -%}
    {%- set relation = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
    {%- if relation is not none -%}
      {%- do counted.append("select '" ~ node.name ~ "' as model_name, cast(max(_ingested_at) as varchar) as watermark from " ~ relation) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set records = [] -%}
  {%- if counted -%}
    {%- for row in run_query(counted | join('\nunion all\n')).rows if row[1] is not none -%}
      {%- do records.append("select '" ~ invocation_id ~ "' as invocation_id, '" ~ row[0]
            ~ "' as model_name, timestamp '" ~ row[1] ~ "' as watermark") -%}
    {%- endfor -%}
  {%- endif -%}
  {%- if not records -%}
    {%- do records.append("select cast(null as varchar) as invocation_id, cast(null as varchar) as model_name, cast(null as "
          ~ type_timestamp() ~ ") as watermark where false") -%}
  {%- endif -%}
  {%- set view = data_test_watermarks_relation() -%}
  {%- do adapter.create_schema(view) -%}
  create or replace view {{ view }} as
  {{ records | join('\nunion all\n') }}
{% endmacro %}

{#
  The cutoff the tested model's run in this build read after, as an SQL expression,
  or none when the test must check every row (a test without the placeholder, or see
  above). Called while a data test is compiled: the context's `model` and `config` are
  the test node's. as_literal: a timestamp literal whenever the record exists, on every
  target (one query at compile time), for a test that filters a partitioned raw table:
  Athena prunes partitions by a constant, not by a subquery.
#}
{% macro changed_rows_cutoff(as_literal=false) %}
  {%- if not execute or model.resource_type != 'test' or config.get('where') != changed_rows_placeholder()
        or not data_tests_may_skip_unchanged_rows() -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set tested = graph.nodes.get(model.attached_node) if model.attached_node else none -%}
  {%- if tested is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set literal = literal_recorded_cutoff(tested.name) if as_literal else none -%}
  {{ return(literal if literal is not none else adapter.dispatch('recorded_cutoff', 'dynamodb_lakehouse')(tested.name)) }}
{% endmacro %}

{#
  The condition that keeps the rows of the tested model (`alias`: how the query
  names it; none: unqualified) that this build could have written, or none when the
  test must check every row (see changed_rows_cutoff).
#}
{% macro changed_rows_condition(alias=none) %}
  {%- set cutoff = changed_rows_cutoff() -%}
  {%- if cutoff is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set column = (alias ~ '.' if alias else '') ~ '_ingested_at' -%}
  {{ return('(' ~ column ~ ' is null or ' ~ column ~ ' > ' ~ cutoff ~ ')') }}
{% endmacro %}

{#
  The cutoff the run of model `model_name` in this invocation read after (its
  recorded watermark minus var raw_lookback_hours), as an SQL expression, or none
  for "check every row". Athena: a subquery on the record, the epoch without one (one
  query per test would cost more than it saves).
#}
{% macro default__recorded_cutoff(model_name) -%}
  {%- set cutoff -%}
    coalesce((
        select {{ dbt.dateadd('hour', -var('raw_lookback_hours'), 'recorded.watermark') }}
        from {{ data_test_watermarks_relation() }} as recorded
        where recorded.invocation_id = '{{ invocation_id }}' and recorded.model_name = '{{ model_name }}'
    ), timestamp '1970-01-01 00:00:00')
  {%- endset -%}
  {{ return(cutoff) }}
{%- endmacro %}

{#
  DuckDB: the cutoff as a literal, looked up while the test is compiled, as
  duckdb__lookback_cutoff does for the models: DuckDB skips the row groups a
  comparison with a constant excludes, and plans a constant far better than a
  subquery inside the key tests' semi-join.
#}
{% macro duckdb__recorded_cutoff(model_name) -%}
  {{ return(literal_recorded_cutoff(model_name)) }}
{%- endmacro %}

{# The recorded cutoff as a timestamp literal, looked up now; none without a record. #}
{% macro literal_recorded_cutoff(model_name) -%}
  {%- set view = data_test_watermarks_relation() -%}
  {%- if adapter.get_relation(database=view.database, schema=view.schema, identifier=view.identifier) is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set found = run_query("select cast(" ~ dbt.dateadd('hour', -var('raw_lookback_hours'), 'watermark')
        ~ " as varchar) from " ~ view ~ " where invocation_id = '" ~ invocation_id
        ~ "' and model_name = '" ~ model_name ~ "'").rows -%}
  {{ return("timestamp '" ~ found[0][0] ~ "'" if found else none) }}
{%- endmacro %}

{#
  dbt wraps the tested relation of every generic test in get_where_subquery. Why an
  override: a where config in YAML is rendered when the project is parsed, with var()
  and env_var() but no project macros, so it cannot hold this narrowing, which needs
  the invocation, the graph and (on DuckDB) a query; dbt documents a placeholder
  resolved here as the way to give a where config such logic
  (docs.getdbt.com/reference/resource-configs/where, "Custom logic"). Here the
  placeholder becomes the narrowing described at the top, or nothing. Any other
  where value, or none, works exactly as in dbt.
#}
{% macro get_where_subquery(relation) -%}
  {%- set where = config.get('where', '') -%}
  {%- if where != changed_rows_placeholder() -%}
    {{ return(dbt.get_where_subquery(relation)) }}
  {%- endif -%}
  {%- set test_name = model.test_metadata.name if model.test_metadata else none -%}
  {%- set kwargs = model.test_metadata.kwargs if model.test_metadata else {} -%}
  {%- if test_name == 'holds_latest_raw_change' -%}
    {{ return(relation) }}
  {%- endif -%}
  {%- set key_columns = {'unique': [kwargs.get('column_name')], 'unique_combination': kwargs.get('combination')}.get(test_name) -%}
  {%- set condition = changed_rows_condition('changed' if key_columns else none) -%}
  {%- if condition is none -%}
    {{ return(relation) }}
  {%- elif key_columns -%}
    {#- IN for one column (a plain semi-join); EXISTS for several, which Trino needs. -#}
    {%- if key_columns | length == 1 -%}
      {{ return('(select * from ' ~ relation ~ ' where ' ~ key_columns[0] ~ ' in (select ' ~ key_columns[0]
                ~ ' from ' ~ relation ~ ' as changed where ' ~ condition ~ ')) dbt_subquery') }}
    {%- endif -%}
    {%- set matches = [] -%}
    {%- for column in key_columns -%}
      {%- do matches.append('changed.' ~ column ~ ' = tested.' ~ column) -%}
    {%- endfor -%}
    {{ return('(select * from ' ~ relation ~ ' as tested where exists (select 1 from ' ~ relation
              ~ ' as changed where ' ~ matches | join(' and ') ~ ' and ' ~ condition ~ ')) dbt_subquery') }}
  {%- else -%}
    {{ return('(select * from ' ~ relation ~ ' where ' ~ condition ~ ') dbt_subquery') }}
  {%- endif -%}
{%- endmacro %}
