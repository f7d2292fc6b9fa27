# wap-lake: every entry point a developer or CI needs. `make test` and `make demo` work on a fresh clone:
# they create .venv, install the pinned requirements and fetch the pinned jars first (idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JARS := .cache/jars
MVN := mvn -q -B -f docker/pom.xml
# The AWS Lambda Runtime Interface Emulator ships as a static binary inside the aws-sam-cli wheel.
SAM_CLI_VERSION := 1.150.0
RIE := .cache/rie/aws-lambda-rie

.PHONY: setup jars rie chromium lint test test-unit demo bench stack-up stack-down clean emr-artifacts

setup: $(VENV)/.installed jars rie

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
	$(MVN) dependency:copy@nessie-server -DoutputDirectory=$(CURDIR)/$(JARS)/nessie
	touch $@

rie: $(RIE)

$(RIE): | $(VENV)/.installed
	mkdir -p .cache/rie
	$(PY) -m pip download -q --no-deps aws-sam-cli==$(SAM_CLI_VERSION) -d .cache/rie
	$(PY) scripts/extract_rie.py .cache/rie/aws_sam_cli-$(SAM_CLI_VERSION)-py3-none-any.whl $@
	rm -f .cache/rie/aws_sam_cli-*.whl

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check functions infra tests scripts benchmarks data_loader.py setup_aws.py
	$(VENV)/bin/mypy

# Headless Chromium from Debian's packages, for the dashboard's browser test (needs root; nothing when installed).
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The test command (README, .ci/run): lint, types, then every tier against the real components.
test: setup lint chromium
	$(PY) -m pytest -q -p no:cacheprovider

test-unit: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

demo: setup
	$(PY) scripts/demo.py

# The service against the reference approach, side by side on one local stack; writes benchmarks/results/.
bench: setup
	$(PY) -m benchmarks.run

# The EMR Serverless job's artefacts (entry point, package, Python archive, audits, pinned jars) into dist/emr,
# uploaded to WAP_EMR_ARTIFACTS (default s3://$LAKE_BUCKET/emr/artifacts; AWS, or the local stack after
# `eval "$$(wap stack env)"`). setup_aws.py runs the same upload after provisioning.
emr-artifacts: setup
	rm -rf dist/emr
	$(PY) -m wap_ingest.artifacts build --dest dist/emr
	$(PY) -m wap_ingest.artifacts upload --dest dist/emr

stack-up: setup
	$(VENV)/bin/wap stack up

stack-down:
	$(VENV)/bin/wap stack down

clean:
	-$(VENV)/bin/wap stack down
	rm -rf $(VENV) $(JARS) .wap .pytest_cache .mypy_cache .ruff_cache dist

# The Serverless Framework v3 CLI pinned in package.json/package-lock.json, into ./node_modules
# (`npx serverless deploy`, see docs/deploy.md). The serverless.yml tests install it themselves if missing.
.PHONY: deploy-tools
deploy-tools:
	npm ci --no-audit --no-fund
