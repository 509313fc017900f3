-- How far behind each curated table is, in whole hours (mart_freshness, read left to right):
-- hours_since_build large: dbt has not run, or a run failed; hours_since_ingestion
-- large: the stream delivered nothing new before that build; hours_since_newest_event
-- large: no newer changes in DynamoDB, or they arrive late. The daily aggregates have
-- no ingestion time (null).
select
    curated_table,
    row_count,
    built_at,
    {{ hours_between('built_at', 'cast(current_timestamp as ' ~ type_timestamp() ~ ')') }} as hours_since_build,
    {{ hours_between('newest_ingested_at', 'built_at') }} as hours_since_ingestion,
    {{ hours_between('newest_event_at', 'built_at') }} as hours_since_newest_event
from {{ ref('mart_freshness') }}
order by curated_table
