"""Benchmarks (`make bench`) and fault drills (`make drills`) of the lakehouse.

Every case that starts Spark runs in its own subprocess (`python -m benchmarks.cases`)
so that its JVM, memory and cores are measured on their own; the orchestrators
(`benchmarks.run`, `benchmarks.drills`) only generate data, start cases and compare.
"""
