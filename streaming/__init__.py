"""DynamoDB change data capture into a raw lakehouse table with PySpark.

The flow is source -> decode -> order -> sink; `streaming.pipeline.batch.process_batch`
ties the pure DataFrame functions together for every runner (local, Glue, tests).
"""
