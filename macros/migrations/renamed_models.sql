{#
  on-run-start: a renamed model keeps its built table, so the next run stays incremental
  on the rows (and, on Athena, the Iceberg snapshots) it already has instead of rebuilding
  them from a raw log that may no longer reach back far enough. The model's YAML names
  its previous name in `config: {meta: {renamed_from: <old name>}}`. When the model's
  schema holds a relation of the old name and none of the new one, it is renamed; a
  fresh target, or one renamed before, is left alone. When both exist the old one is
  left for its owner to drop, and a line says so.

  The rename is dbt's rename_relation, dispatched per adapter: DuckDB's ALTER ... RENAME
  TO, and on Athena dbt-athena's ALTER TABLE ... RENAME TO, which Athena supports for
  Iceberg tables, the table type of this project's tables there (dbt_project.yml):
  https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-alter-table-rename.html
  Through the adapter, dbt's relation cache learns of the rename, so the model's
  materialization finds its table under the new name.
#}
{% macro rename_tables_of_renamed_models() %}
  {%- if not execute -%}
    {{ return('select 1') }}
  {%- endif -%}
  {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.config.meta.get('renamed_from') -%}
    {%- set old_name = node.config.meta['renamed_from'] -%}
    {%- set old = adapter.get_relation(database=node.database, schema=node.schema, identifier=old_name) -%}
    {%- set current = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
    {%- if old is not none and current is none -%}
      {%- do adapter.rename_relation(old, old.incorporate(path={'identifier': node.alias})) -%}
      {%- do adapter.commit() -%}
      {%- do log('renamed ' ~ old ~ ' to ' ~ node.alias ~ ': ' ~ node.name ~ ' was ' ~ old_name
                 ~ ', and keeps its rows', info=true) -%}
    {%- elif old is not none -%}
      {%- do log('both ' ~ old ~ ' and ' ~ current ~ ' exist: ' ~ node.name ~ ' builds on ' ~ current
                 ~ '; drop ' ~ old ~ ', its table from before the rename, once nothing reads it', info=true) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return('select 1') }}
{% endmacro %}
