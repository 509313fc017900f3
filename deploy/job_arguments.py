"""The Glue job's DefaultArguments, built from the job script's own parameter names.

streaming/runtime/glue_job.py declares REQUIRED_ARGS and OPTIONAL_ARGS; the stack supplies a
value for every required one (Glue sets JOB_NAME) and may override optional ones. A
parameter renamed or added in the script without the stack following fails synthesis.
"""
from __future__ import annotations

from collections.abc import Mapping

from streaming.runtime.glue_job import OPTIONAL_ARGS, REQUIRED_ARGS

# Glue passes --JOB_NAME itself.
SET_BY_GLUE = frozenset({"JOB_NAME"})


class JobArgumentsError(ValueError):
    """The stack's job parameters do not match those of streaming/runtime/glue_job.py."""


def glue_system_arguments(extra_py_files: str, temp_dir: str, spark_event_logs: str) -> dict[str, str]:
    """Glue's own special parameters the job relies on
    (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-glue-arguments.html)."""
    return {
        # Glue 5.1's built-in Hudi 1.0.2 on the classpath.
        "--datalake-formats": "hudi",
        # Spark's Hive metastore client talks to the Glue Data Catalog: the job's
        # Hudi sync (--sync_mode hms) registers the raw tables through it.
        "--enable-glue-datacatalog": "true",
        # Hudi requires Kryo (https://hudi.apache.org/docs/quick-start-guide, spark-shell setup).
        "--conf": "spark.serializer=org.apache.spark.serializer.KryoSerializer",
        "--extra-py-files": extra_py_files,
        "--enable-metrics": "true",
        "--enable-continuous-cloudwatch-log": "true",
        "--enable-spark-ui": "true",
        "--spark-event-logs-path": spark_event_logs,
        "--TempDir": temp_dir,
        "--job-language": "python",
    }


def job_parameters(required: Mapping[str, str], optional: Mapping[str, str]) -> dict[str, str]:
    """--name: value for the script's parameters; every required one must be given."""
    expected = set(REQUIRED_ARGS) - SET_BY_GLUE
    missing = sorted(expected - set(required))
    unexpected = sorted(set(required) - expected)
    if missing or unexpected:
        raise JobArgumentsError(
            f"streaming/runtime/glue_job.py requires {sorted(expected)}; the stack is missing {missing} "
            f"and gives unknown {unexpected}"
        )
    unknown_optional = sorted(set(optional) - set(OPTIONAL_ARGS))
    if unknown_optional:
        raise JobArgumentsError(
            f"{unknown_optional} are not optional parameters of streaming/runtime/glue_job.py ({sorted(OPTIONAL_ARGS)})"
        )
    empty = sorted(name for name, value in {**required, **optional}.items() if not str(value))
    if empty:
        raise JobArgumentsError(f"job parameters without a value: {empty}")
    return {f"--{name}": str(value) for name, value in {**required, **optional}.items()}
