"""Synthesizing the stack needs the contracts (the DynamoDB tables they name) and the Glue
job's parameters, but never Spark: `make synth` and the CDK CLI run where pyspark need
not be installed, and importing it costs seconds for nothing."""
from __future__ import annotations

from cli_processes import fresh_python
from node_required import require_node


def test_importing_the_cdk_app_imports_no_pyspark():
    # aws_cdk starts its Node.js runtime on import.
    require_node()
    probe = (
        "import sys, deploy.app; "
        "print('streaming.contracts.loader' in sys.modules); "
        "print(sorted({name.split('.')[0] for name in sys.modules} & {'pyspark', 'py4j'}))"
    )
    completed = fresh_python(probe)
    assert completed.returncode == 0, completed.stderr
    loads_contracts, spark_modules = completed.stdout.splitlines()[-2:]
    assert spark_modules == "[]", f"importing deploy/app.py imported {spark_modules}"
    assert loads_contracts == "True", "the app no longer loads the contracts: this test checks nothing"
