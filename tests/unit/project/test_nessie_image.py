"""The Nessie image (docker/nessie) and the deployment that runs it, checked statically: hadolint, the base image
and its pin, the entry point and command, the CA bundle the JDBC URL verifies against, and no password in the
deployment file.
tests/integration/stack/test_nessie_entrypoint.py runs the entry point itself."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import yaml
from infra.provision import documents

from tests.paths import ROOT
from tests.unit.project.test_dockerfile import _hadolint, instructions

IMAGE_DIR = ROOT / "docker" / "nessie"
DOCKERFILE = IMAGE_DIR / "Dockerfile"
ENTRYPOINT = IMAGE_DIR / "entrypoint.sh"
BUNDLE_URL = "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"


def _args(kind: str) -> list[str]:
    return [rest for keyword, rest in instructions(DOCKERFILE) if keyword == kind]


def _service_environment() -> dict[str, str]:
    service = yaml.safe_load((documents.INFRA_DIR / "nessie-service.yml").read_text())
    return dict(service["containers"]["nessie"]["environment"])


def test_the_nessie_dockerfile_passes_hadolint_without_any_finding() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True, text=True, check=False, timeout=60,
    )

    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0
    assert "hadolint ignore" not in DOCKERFILE.read_text()


def test_it_runs_nessies_own_image_pinned_by_digest_through_the_entry_point() -> None:
    text = DOCKERFILE.read_text()

    assert [r.split()[0] for r in _args("FROM")] == ["${MAVEN_IMAGE}", "${NESSIE_IMAGE}"]
    assert re.search(r"^ARG MAVEN_IMAGE=maven:[^@\s]+@sha256:[0-9a-f]{64}$", text, re.M)
    assert re.search(r"^ARG NESSIE_IMAGE=ghcr\.io/projectnessie/nessie:\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$", text, re.M)
    assert "mvn" not in " ".join(_args("RUN"))  # no Nessie jar from Maven: the server is Nessie's image
    assert _args("ENTRYPOINT") == ['["/opt/wap/entrypoint.sh"]']
    assert _args("CMD") == ['["/opt/jboss/container/java/run/run-java.sh"]']  # Nessie's image's start script
    assert _args("USER") == ["10000:10001"]  # Nessie's image's user `nessie` (tools/dockerbuild), not root


def test_make_pin_images_refreshes_the_nessie_image_it_names() -> None:
    """`make pin-images` rewrites `ARG NESSIE_IMAGE=<tag>@<digest>` from the tag it lists: the same tag as here."""
    makefile = (ROOT / "Makefile").read_text()
    [tag] = re.findall(r"^ARG NESSIE_IMAGE=([^@\s]+)@", DOCKERFILE.read_text(), re.M)

    assert f"docker/nessie/Dockerfile:NESSIE_IMAGE={tag}" in makefile
    assert "docker/nessie/Dockerfile:JRE_IMAGE" not in makefile


def test_every_file_copied_from_the_context_exists_and_is_let_in() -> None:
    sources = []
    for rest in _args("COPY"):
        words = shlex.split(rest)
        if not any(w.startswith("--from=") for w in words):
            sources += [w for w in words[:-1] if not w.startswith("--")]

    assert set(sources) == {"docker/nessie/FetchParameter.java", "docker/nessie/entrypoint.sh"}
    allowed = (IMAGE_DIR / "Dockerfile.dockerignore").read_text().splitlines()
    for source in sources:
        assert (ROOT / source).is_file(), source
        assert f"!{source}" in allowed, source


def test_the_entry_point_finds_the_compiled_fetcher_where_the_image_puts_it() -> None:
    compile_ = next(r for r in _args("RUN") if "javac" in r)
    copies = {shlex.split(r)[-2]: shlex.split(r)[-1] for r in _args("COPY")}
    classes = re.search(r"-d (\S+)", compile_)

    assert classes is not None and "javac --release 17" in compile_ and compile_.endswith("FetchParameter.java")
    assert copies[classes.group(1) + "/"] == "/opt/wap/fetcher/"
    assert copies["docker/nessie/entrypoint.sh"] == "/opt/wap/entrypoint.sh"
    assert 'classpath="${WAP_FETCHER_CLASSPATH:-/opt/wap/fetcher}"' in ENTRYPOINT.read_text()


def test_the_entry_point_is_valid_bash_and_executable() -> None:
    subprocess.run(["bash", "-n", str(ENTRYPOINT)], check=True, timeout=30)
    assert ENTRYPOINT.stat().st_mode & 0o111
    assert 'exec "$@"' in ENTRYPOINT.read_text()
    assert "set -x" not in ENTRYPOINT.read_text().replace("set +x", "")


def test_the_jdbc_connection_verifies_the_server_against_the_bundled_ca() -> None:
    [add] = _args("ADD")
    words = shlex.split(add)
    url = _service_environment()["QUARKUS_DATASOURCE_POSTGRESQL_JDBC_URL"]

    assert words[-2:] == [BUNDLE_URL, "/opt/wap/rds-global-bundle.pem"]
    assert "--chmod=644" in words  # remote ADDs are 600 by default: unreadable for the nessie user
    assert url.endswith("?sslmode=verify-full&sslrootcert=/opt/wap/rds-global-bundle.pem")
    assert "sslmode=require" not in (documents.INFRA_DIR / "nessie-service.yml").read_text()


def test_the_deployment_names_the_password_parameter_and_never_holds_the_password() -> None:
    environment = _service_environment()
    text = (documents.INFRA_DIR / "nessie-service.yml").read_text()

    assert not [k for k in environment if "PASSWORD" in k and k != "WAP_DB_PASSWORD_PARAMETER"]
    assert environment["WAP_DB_PASSWORD_PARAMETER"] == "${DbPasswordParameter}"
    assert environment["WAP_SECRETS_ACCESS_KEY_ID"] == "${SecretsKeyId}"
    assert environment["WAP_SECRETS_SECRET_ACCESS_KEY"] == "${SecretsKeySecret}"
    assert "image: \"${NessieImage}\"" in text
    assert "DbPassword}" not in text
