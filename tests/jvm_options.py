"""The options every JVM of the test suite starts with (tests/conftest.py sets them).

A module of its own: test files cannot import a conftest by name, since pytest loads
several (tests/, tests/dbt/, tests/deploy/) and `conftest` is whichever came first.
"""

# The client JIT compiler only, and the serial collector: the suite is CPU-bound on two
# cores and its JVMs are short-lived, so the server compiler's background threads cost
# more CPU than their faster code pays back. Measured on one cold `lakehouse stream` of
# the generator's mix (the process tree's CPU time from a cgroup): 108.8 s -> 55.7 s.
# Results are the same code's; only the JIT differs. The benchmarks and `lakehouse`
# itself keep the JVM's defaults.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
