"""File operations through the session's Hadoop FileSystem, so the same code works on a
local folder, `s3://` (Glue, EMR) and `s3a://`: the sinks' batch folders, the Hudi
timeline reader and the Glue job's checkpoint id all go through it."""
from __future__ import annotations

import re

from pyspark.sql import SparkSession


def jvm_class_loadable(spark: SparkSession, class_name: str) -> bool:
    """True when the session's JVM can load `class_name` (a datasource, a catalog client).

    Asked of the thread's context class loader, the one Spark loads datasources with:
    jars given by `spark.jars`, `--jars` or `--packages` are added to Spark's own
    class loader, which `Class.forName` from py4j (the system loader) does not see.
    """
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(class_name)
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


# Characters Hadoop's glob treats specially; a backslash makes each literal.
_GLOB_SPECIAL = re.compile(r"([\\\[\]{}*?])")


def hadoop_glob_literal(path: str) -> str:
    """`path` as a Hadoop glob that matches exactly that path. Spark's file sources glob
    the path they load (a data directory named `run[2]` would be read as `run2`), and so
    does `globStatus`."""
    return _GLOB_SPECIAL.sub(r"\\\1", path)


class HadoopFiles:
    """Hadoop FileSystem calls for the session's configuration (credentials, S3 settings)."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path_and_fs(self, path: str):  # type: ignore[no-untyped-def]  # py4j objects
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        return hadoop_path, hadoop_path.getFileSystem(self._conf)

    def exists(self, path: str) -> bool:
        hadoop_path, filesystem = self._path_and_fs(path)
        return bool(filesystem.exists(hadoop_path))

    def list_names(self, folder: str) -> list[str]:
        hadoop_path, filesystem = self._path_and_fs(folder)
        return [status.getPath().getName() for status in filesystem.listStatus(hadoop_path)]

    def read_text(self, path: str) -> str:
        hadoop_path, filesystem = self._path_and_fs(path)
        stream = filesystem.open(hadoop_path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode("utf-8")
        finally:
            stream.close()

    def glob_in(self, folder: str, pattern: str) -> list[str]:
        """Paths matching the glob `pattern` below `folder`, whose own name is taken
        literally: a data directory named e.g. `run[2]` is not a character class."""
        hadoop_path, filesystem = self._path_and_fs(f"{hadoop_glob_literal(folder.rstrip('/'))}/{pattern}")
        return sorted(status.getPath().toString() for status in filesystem.globStatus(hadoop_path) or [])

    def delete(self, path: str) -> None:
        hadoop_path, filesystem = self._path_and_fs(path)
        filesystem.delete(hadoop_path, True)

    def move(self, source: str, target: str) -> None:
        """Rename `source` to `target`, which must not exist (Hadoop would move it inside)."""
        source_path, filesystem = self._path_and_fs(source)
        target_path, _ = self._path_and_fs(target)
        filesystem.mkdirs(target_path.getParent())
        if not filesystem.rename(source_path, target_path):
            raise OSError(f"could not rename {source} to {target}")

    def write_text(self, path: str, text: str) -> None:
        """Create `path` with `text`; fails if it exists (no silent overwrite)."""
        hadoop_path, filesystem = self._path_and_fs(path)
        stream = filesystem.create(hadoop_path, False)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
