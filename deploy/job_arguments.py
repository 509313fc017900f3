"""The Glue job's DefaultArguments, built from the job script's own parameter names.

streaming/runtime/glue_job.py declares REQUIRED_ARGS and OPTIONAL_ARGS; the stack supplies a
value for every required one (Glue sets JOB_NAME) and may override optional ones. A
parameter renamed or added in the script without the stack following fails synthesis.
"""
from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from streaming.runtime.glue_job import OPTIONAL_ARGS, REQUIRED_ARGS

# Glue passes --JOB_NAME itself.
SET_BY_GLUE = frozenset({"JOB_NAME"})
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# Third-party modules the job imports on Glue besides Spark's own: the contract loader
# reads YAML (streaming/contracts/loader.py). Whether Glue 5.1 provides PyYAML could not
# be confirmed from its list of provided modules
# (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-python-libraries.html,
# "Python modules already provided in AWS Glue"), so the job installs the version the
# tests run with, pinned in pyproject.toml, rather than depend on that list.
GLUE_JOB_MODULES = ("PyYAML",)


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
        # No --enable-continuous-cloudwatch-log: Glue 5.x logs every job in real time and
        # the flag is a Glue 4.0-and-earlier feature
        # (https://docs.aws.amazon.com/glue/latest/dg/monitor-continuous-logging-enable.html).
        "--additional-python-modules": ",".join(pinned_requirements(GLUE_JOB_MODULES)),
        "--enable-spark-ui": "true",
        "--spark-event-logs-path": spark_event_logs,
        "--TempDir": temp_dir,
        "--job-language": "python",
    }


def pinned_requirements(names: tuple[str, ...]) -> list[str]:
    """`name==version` of each of `names` as pyproject.toml pins it."""
    pins = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    found = [pin for pin in pins if pin.split("==")[0] in names]
    missing = sorted(set(names) - {pin.split("==")[0] for pin in found})
    if missing:
        raise JobArgumentsError(f"pyproject.toml pins no {missing}, which the Glue job installs")
    return found


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
