"""The versions docs/deploy.md "Versions" names are the ones the code runs: Iceberg and the local Nessie server from
docker/pom.xml (and their digests), the stack's Nessie, the deployed Nessie image, and the commands that build it."""

from __future__ import annotations

import re
import zipfile

import pytest

from tests.paths import ROOT
from wap_stack.components import NESSIE_VERSION

DEPLOY = ROOT / "docs" / "deploy.md"
POM = ROOT / "docker" / "pom.xml"
MANIFEST = ROOT / "docker" / "jars.sha256"
NESSIE_DOCKERFILE = ROOT / "docker" / "nessie" / "Dockerfile"
JARS = ROOT / ".cache" / "jars" / "spark"
FIXED_10062 = (0, 101, 1)  # projectnessie/nessie#10062


def _documented() -> dict[str, str]:
    """The table of docs/deploy.md "Versions": its first column's text -> its version."""
    text = DEPLOY.read_text()
    section = text[text.index("## Versions\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): cells[1].strip() for cells in rows[1:]}


def _version_of(component: str) -> str:
    [version] = [v for name, v in _documented().items() if name.startswith(component)]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), (component, version)
    return version


def _pom(property_name: str) -> str:
    found = re.search(rf"<{re.escape(property_name)}>([^<]+)</{re.escape(property_name)}>", POM.read_text())
    assert found, property_name
    return found.group(1)


def _as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_the_table_names_each_version_once() -> None:
    assert [name.split(",")[0] for name in _documented()] == [
        "Iceberg", "Nessie client inside Iceberg's Spark runtime", "Nessie server", "Nessie server"]


def test_iceberg_is_the_pinned_one_with_its_digests_and_no_nessie_extensions() -> None:
    iceberg = _version_of("Iceberg")
    manifest = MANIFEST.read_text()

    assert _pom("iceberg.version") == iceberg
    assert f"  spark/iceberg-spark-runtime-{_pom('spark.binary')}-{iceberg}.jar\n" in manifest
    assert f"  spark/iceberg-aws-bundle-{iceberg}.jar\n" in manifest
    assert "nessie-spark-extensions" not in POM.read_text() and "nessie-spark-extensions" not in manifest


def test_the_nessie_client_is_the_one_iceberg_bundles() -> None:
    jar = JARS / f"iceberg-spark-runtime-{_pom('spark.binary')}-{_version_of('Iceberg')}.jar"
    if not jar.is_file():
        pytest.skip(f"no {jar.name}: `make jars` fetches it")
    with zipfile.ZipFile(jar) as runtime:
        properties = runtime.read("META-INF/maven/org.projectnessie.nessie/nessie-client/pom.properties").decode()

    assert f"version={_version_of('Nessie client')}" in properties.split()


def test_the_local_nessie_server_is_the_pinned_runner_the_stack_starts() -> None:
    local = _version_of("Nessie server, local")

    assert local == NESSIE_VERSION
    assert _pom("nessie.version") == local
    assert f"  nessie/nessie-quarkus-{local}-runner.jar\n" in MANIFEST.read_text()


def test_the_deployed_nessie_is_the_image_the_dockerfile_pins_and_the_docs_build() -> None:
    deployed = _version_of("Nessie server, deployed")
    images = re.findall(r"^ARG NESSIE_IMAGE=ghcr\.io/projectnessie/nessie:([0-9.]+)@sha256:[0-9a-f]{64}$",
                        NESSIE_DOCKERFILE.read_text(), re.M)

    assert images == [deployed]
    assert f"docker/nessie/Dockerfile:NESSIE_IMAGE=ghcr.io/projectnessie/nessie:{deployed}" in (
        ROOT / "Makefile").read_text()
    for document in (DEPLOY, ROOT / "README.md", NESSIE_DOCKERFILE):
        tags = set(re.findall(r"wap-nessie:([0-9.]+)", document.read_text()))
        assert tags == {deployed}, (document.name, tags)
    assert f"Nessie's {deployed} image" in (ROOT / "infra" / "nessie-service.yml").read_text()


def test_the_deployed_nessie_has_the_fix_of_10062_and_the_local_one_is_where_the_docs_test_it() -> None:
    """docs/deploy.md says the local 0.99 server has the bug (and the service is not exposed) and the deployed one
    has the fix: tests/integration/adapters/catalog/test_first_commit_race.py holds the local half."""
    assert _as_tuple(_version_of("Nessie server, deployed")) >= FIXED_10062
    assert _as_tuple(_version_of("Nessie server, local")) < FIXED_10062
    assert "nessie#10062" in DEPLOY.read_text()
