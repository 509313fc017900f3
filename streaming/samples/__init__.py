"""Sample data the project makes for the demo, tests and benchmarks: DynamoDB CDC records
and landing files (generator), DynamoDB exports (export_writer), and raw change-log
batches written directly (raw_fixtures). Sits beside runtime: imports layers 1-3 only."""
