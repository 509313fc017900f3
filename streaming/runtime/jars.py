"""The JVM libraries the local Spark session loads: pinned, checksummed, kept outside git.

Production gets Hudi from Glue 5.1 (`--datalake-formats hudi`, Hudi 1.0.2). Locally the
same bundle comes from Maven Central, fetched once by `make venv`
(`python -m streaming.runtime.jars fetch`) into `<venv>/jars/`, where `local_session`
finds it. Each jar is checked against the SHA-256 recorded here, so a changed artifact
is refused instead of run.

Fetching uses Maven when it is on PATH, else Spark's own resolver (Ivy, through the
pyspark wheel's spark-submit), so a machine with Python and Java alone can fetch too.

`S3A_JARS`, the Hadoop S3A file system and the AWS SDK it calls, are an optional set: only
the s3a drill (benchmarks/s3a_drill.py), which writes the raw tables through `s3a://`,
loads them, and fetches them when it runs (`fetch --s3a` by hand); `make venv` does not,
since the SDK bundle alone is several hundred MB.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from streaming.io.formats.raw_format import MavenJar
from streaming.io.formats.registry import FORMATS

JARS_ENV = "LAKEHOUSE_JARS_DIR"

# Every raw format's jars (each format declares its own).
LOCAL_JARS = tuple(jar for raw_format in FORMATS.values() for jar in raw_format.jars)

# hadoop-aws must be the version of the Hadoop client pyspark ships
# (pyspark/jars/hadoop-client-api-3.3.4.jar for Spark 3.5): S3AFileSystem is built against
# that Hadoop's internal classes. The SDK bundle is the version hadoop-aws 3.3.4's POM names.
HADOOP_AWS = MavenJar(
    "org.apache.hadoop", "hadoop-aws", "3.3.4",
    "53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a",
)
AWS_SDK_BUNDLE = MavenJar(
    "com.amazonaws", "aws-java-sdk-bundle", "1.12.262",
    "873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5",
)
S3A_JARS = (HADOOP_AWS, AWS_SDK_BUNDLE)


class JarError(RuntimeError):
    """A pinned jar could not be fetched, or is not the artifact that was pinned."""


def jars_dir() -> Path:
    """`$LAKEHOUSE_JARS_DIR`, else `jars/` in the running Python's environment (the venv)."""
    return Path(os.environ.get(JARS_ENV) or Path(sys.prefix) / "jars")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def local_jar(jar: MavenJar, folder: Path | None = None) -> Path | None:
    """The fetched jar's path, or None when it was never fetched."""
    path = (folder or jars_dir()) / jar.file_name
    return path if path.is_file() else None


def _fetch_with_maven(jar: MavenJar, into: Path) -> Path:
    subprocess.run(
        ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={jar.coordinate}", f"-DoutputDirectory={into}"],
        check=True, stdout=subprocess.DEVNULL,
    )
    return into / jar.file_name


def _fetch_with_spark(jar: MavenJar, into: Path) -> Path:
    """Spark's --packages resolver; it runs an empty application once the jars are resolved."""
    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with tempfile.TemporaryDirectory() as scratch:
        app = Path(scratch) / "resolve_only.py"
        app.write_text("")
        ivy = Path(scratch) / "ivy"
        subprocess.run(
            [str(spark_submit), "--packages", jar.coordinate, "--conf", f"spark.jars.ivy={ivy}", str(app)],
            check=True, stdout=subprocess.DEVNULL, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
        resolved = ivy / "jars" / f"{jar.group}_{jar.file_name}"
        shutil.copy(resolved, into / jar.file_name)
    return into / jar.file_name


def fetch(jar: MavenJar, folder: Path | None = None) -> Path:
    """Put `jar` into `folder` (default: jars_dir()) unless a verified copy is there."""
    folder = folder or jars_dir()
    target = folder / jar.file_name
    if target.is_file() and sha256_of(target) == jar.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as staging:
        fetcher = _fetch_with_maven if shutil.which("mvn") else _fetch_with_spark
        try:
            fetched = fetcher(jar, Path(staging))
        except (subprocess.CalledProcessError, OSError) as exc:
            raise JarError(f"could not fetch {jar.coordinate} from Maven Central ({exc})") from exc
        found = sha256_of(fetched)
        if found != jar.sha256:
            raise JarError(f"{jar.coordinate}: SHA-256 {found} is not the pinned {jar.sha256}; not used")
        os.replace(fetched, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streaming.runtime.jars",
                                     description="Fetch the pinned jars the local Spark session loads.")
    parser.add_argument("command", choices=["fetch"])
    parser.add_argument("--into", type=Path, default=None, help=f"folder (default: ${JARS_ENV}, else <venv>/jars)")
    parser.add_argument("--s3a", action="store_true",
                        help="the optional S3A set (hadoop-aws and the AWS SDK bundle) instead of the Hudi bundle")
    args = parser.parse_args(argv)
    jars, without = ((S3A_JARS, "the s3a drill cannot run here") if args.s3a else
                     (LOCAL_JARS, "the Hudi sink cannot run here; the Parquet sink (--sink parquet) still works"))
    for jar in jars:
        try:
            path = fetch(jar, args.into)
        except JarError as exc:
            print(f"{exc}: {without}", file=sys.stderr)
            return 1
        print(f"{jar.coordinate}: {path} (sha256 verified)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
