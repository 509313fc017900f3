"""dbt helpers of the lakehouse: run dbt in-process, raw fixtures, Hudi raw loading."""

from lakehouse_dbt.reprocess import reprocess_args
from lakehouse_dbt.runner import PROJECT_DIR, run_dbt
from lakehouse_dbt.summary import summarize_marts

__all__ = ["PROJECT_DIR", "reprocess_args", "run_dbt", "summarize_marts"]
