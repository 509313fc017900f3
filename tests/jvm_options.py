"""The options every JVM of the test suite starts with (tests/conftest.py sets them).

A module of its own: test files cannot import a conftest by name, since pytest loads
several (tests/, tests/dbt/, tests/deploy/) and `conftest` is whichever came first.
"""
import sys
from pathlib import Path

# The client JIT compiler only, and the serial collector: the suite is CPU-bound on two
# cores and its JVMs are short-lived, so the server compiler's background threads cost
# more CPU than their faster code pays back. Measured on one cold `lakehouse stream` of
# the generator's mix (the process tree's CPU time from a cgroup): 108.8 s -> 55.7 s.
# Results are the same code's; only the JIT differs. The benchmarks and `lakehouse`
# itself keep the JVM's defaults.
BASE_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# The classes a Spark JVM loads, written once per venv by `make test`
# (tests/jvm_class_archive.py). Mapping them saves loading and verifying thousands of
# classes in every JVM the suite starts, the session's and each `lakehouse` subprocess's:
# starting a session and running one query measured 11.2-12.1 s of CPU without it and
# 6.3-6.4 s with it; tests/cli/test_cli_ops.py 77.4 -> 67.6 s. Without the file (make
# test-fast, a bare pytest) the JVMs load their classes as before.
CLASS_ARCHIVE = Path(sys.prefix) / "jvm" / "test-classes.jsa"

# Spark splits --driver-java-options at whitespace: a venv path holding any is left without it.
_ARCHIVE_USABLE = CLASS_ARCHIVE.is_file() and not any(character.isspace() for character in str(CLASS_ARCHIVE))
TEST_JVM_OPTIONS = BASE_JVM_OPTIONS + (f" -XX:SharedArchiveFile={CLASS_ARCHIVE}" if _ARCHIVE_USABLE else "")
