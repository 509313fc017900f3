"""Remembered JVM class lookups: the py4j round trips that building a plan makes most.

Every `pyspark.sql.functions` call (`F.col`, `F.when`, ...) reads `sc._jvm.functions`.
py4j's JVM view keeps no cache: each read asks the JVM to resolve the name again, and
the JVM tries it in every package pyspark imported into the view (`java.lang`,
`org.apache.spark.api.java`, `...api.python`, `...ml.python`, ...) before the right one,
each miss a search of every jar on the class path (the Hudi bundle among them). Counted
over four pipeline tests: 9,628 such lookups, 4,092 of them for `functions`; with the
names below remembered, 165.

A JVM view and a py4j package are plain Python objects whose `__getattr__` runs only
when an attribute is missing, so setting the resolved class as an attribute is the
cache. A class, once loaded, is the same for the JVM's life, and the view (the
gateway's) lives as long as the process: nothing can go stale.
"""
from __future__ import annotations

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

# Dotted names under the gateway's JVM view, as pyspark (3.5) and this project read them.
REMEMBERED = (
    "functions",
    "PythonUtils",
    "SparkSession",
    "SparkSession$",
    "Column",
    "PythonRDD",
    "SerDeUtil",
    "SimplePythonFunction",
    "py4j.reflection.TypeUtil",
    "org.apache.hadoop.fs.Path",
    "org.apache.spark.util.Utils",
    "org.apache.spark.sql.Observation",
    "org.apache.spark.sql.types.StructType",
    "org.apache.spark.storage.StorageLevel",
    "org.apache.spark.sql.execution.python.UserDefinedPythonFunction",
    # The higher-order functions (F.transform, F.exists, F.filter, F.map_filter).
    "org.apache.spark.sql.catalyst.expressions.UnresolvedNamedLambdaVariable",
    "org.apache.spark.sql.catalyst.expressions.LambdaFunction",
    "org.apache.spark.sql.catalyst.expressions.ArrayTransform",
    "org.apache.spark.sql.catalyst.expressions.ArrayExists",
    "org.apache.spark.sql.catalyst.expressions.ArrayFilter",
    "org.apache.spark.sql.catalyst.expressions.MapFilter",
)


def remember_jvm_classes(spark: SparkSession) -> None:
    """Resolve each REMEMBERED name once and keep it on the JVM view (idempotent).

    A name this JVM does not have (another Spark version) is left to py4j as before: the
    cache only saves time, it must never stop a start.
    """
    view = spark.sparkContext._jvm
    for dotted in REMEMBERED:
        parent = view
        for part in dotted.split("."):
            resolved = vars(parent).get(part)
            if resolved is None:
                try:
                    resolved = getattr(parent, part)
                except Py4JError:
                    break
                setattr(parent, part, resolved)
            parent = resolved
