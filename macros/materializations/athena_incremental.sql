{#
  Incremental models on Athena: a full refresh of an existing Iceberg table is a
  rebuild-and-swap, never drop-then-build, so analysts always find a complete table.

  Why this override (dbt-athena 1.11.1, materializations/models/incremental/incremental.sql):
  a full refresh takes the "high availability" branch (CTAS <model>__dbt_tmp, rename the
  live table to __bkp, rename __dbt_tmp to the live name, drop __bkp) only when
  `'unique' not in s3_data_naming or external_location is not none`. `external_location`
  is never set in that template, so today the undefined value makes the test true by
  accident; should it ever become a real none, our `s3_data_naming: schema_table_unique`
  makes the test false and the next branch runs `drop_relation(existing_relation)`
  before the CTAS: the live table would be gone for the whole rebuild, and lost if the
  rebuild fails. So the swap is done here, whatever the upstream test says; every
  other case (first build, merge, append, microbatch batches) is dbt-athena's own.

  The `table` materialization needs no override: for an existing Iceberg table it
  always builds <model>__ha first and swaps by renaming (table/table.sql).
#}
{% materialization incremental, adapter='athena', supported_languages=['sql'] -%}
  {%- set existing_relation = load_relation(this) -%}
  {%- if should_full_refresh() and existing_relation is not none and not existing_relation.is_view
        and resolve_table_type() == 'iceberg' -%}
    {{ return(lakehouse_athena_rebuild_and_swap(existing_relation)) }}
  {%- endif -%}
  {{ return(dbt.materialization_incremental_athena()) }}
{%- endmaterialization %}


{#
  Builds the model into <model>__rebuild at a fresh S3 location, then swaps it in by
  two renames and drops the previous table. A failing build leaves the live table
  untouched. The staging table's location must be unique: dbt-athena deletes a
  table's S3 location before a CTAS, and a shared location would be the live data.
#}
{% macro lakehouse_athena_rebuild_and_swap(live_relation) %}
  {%- set s3_data_naming = config.get('s3_data_naming', default=target.s3_data_naming) -%}
  {%- if 'unique' not in s3_data_naming or config.get('external_location') is not none -%}
    {{ exceptions.raise_compiler_error(
        "A safe full refresh of " ~ live_relation ~ " needs a unique S3 location per table "
        ~ "version: use s3_data_naming *_unique and no external_location.") }}
  {%- endif -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set rebuild_relation = api.Relation.create(
        identifier=target_relation.identifier ~ '__rebuild',
        schema=target_relation.schema,
        database=target_relation.database,
        s3_path_table_part=target_relation.identifier,
        type='table') -%}
  {%- set backup_relation = make_temp_relation(target_relation, '__bkp') -%}

  {{ run_hooks(pre_hooks) }}

  {#- Leftovers of an interrupted earlier rebuild; never the live table. -#}
  {%- for leftover in [rebuild_relation, backup_relation] -%}
    {%- if adapter.get_relation(database=leftover.database, schema=leftover.schema,
                                identifier=leftover.identifier) is not none -%}
      {%- do drop_relation(leftover) -%}
    {%- endif -%}
  {%- endfor -%}

  {%- set query_result = safe_create_table_as(
        False, rebuild_relation, compiled_code, 'sql', config.get('force_batch', False) | as_bool) -%}
  {%- do rename_relation(live_relation, backup_relation) -%}
  {%- do rename_relation(rebuild_relation, target_relation) -%}
  {%- do drop_relation(backup_relation) -%}

  {% call statement('main') -%}
    select '{{ query_result }}'
  {%- endcall %}

  {{ run_hooks(post_hooks) }}
  {% do persist_docs(target_relation, model) %}
  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
