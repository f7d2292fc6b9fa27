# wap-lake: every entry point a developer or CI needs. `make test` and `make demo` work on a fresh clone:
# they create .venv, install the pinned requirements and fetch the pinned jars first (idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JARS := .cache/jars
MVN := mvn -q -B -f docker/pom.xml

.PHONY: setup jars lint test test-unit demo stack-up stack-down clean

setup: $(VENV)/.installed jars

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

# The Spark jars (Iceberg runtime, AWS bundle, Nessie SQL extensions) and the Nessie server runner,
# exactly as pinned in docker/pom.xml. Maven caches in ~/.m2; the stamp makes later runs fetch nothing.
jars: $(JARS)/.fetched

$(JARS)/.fetched: docker/pom.xml
	rm -rf $(JARS)/spark $(JARS)/nessie
	$(MVN) dependency:copy-dependencies -DexcludeTransitive=true -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) -P nessie-server dependency:copy-dependencies -DexcludeTransitive=true \
		-DincludeArtifactIds=nessie-quarkus -DoutputDirectory=$(CURDIR)/$(JARS)/nessie
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check functions tests scripts data_loader.py setup_aws.py
	$(VENV)/bin/mypy

# The test command (README, .ci/run): lint, types, then every tier against the real components.
test: setup lint
	$(PY) -m pytest -q -p no:cacheprovider

test-unit: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

demo: setup
	$(PY) scripts/demo.py

stack-up: setup
	$(VENV)/bin/wap stack up

stack-down:
	$(VENV)/bin/wap stack down

clean:
	-$(VENV)/bin/wap stack down
	rm -rf $(VENV) $(JARS) .wap .pytest_cache .mypy_cache .ruff_cache
