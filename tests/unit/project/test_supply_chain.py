"""The supply chain, checked statically: the Python lock files (every transitive dependency pinned with hashes, used
with --require-hashes), Maven's strict checksums, and scripts/verify_jars.py refusing a jar that is not the committed
one. The Dockerfile's side (digests, the runtime lock, the jars' check) is in test_deploy_files.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from packaging.markers import Marker
from scripts import verify_jars

from tests.paths import ROOT

MAKEFILE = ROOT / "Makefile"
LOCKS = ("requirements.lock", "requirements-build.lock", "requirements-runtime.lock")
JARS = ROOT / ".cache" / "jars"
# The project's interpreter: a universal lock may fork a package on its markers (networkx for Python 3.12+).
TARGET = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_file(path: Path) -> dict[str, tuple[str, list[str]]]:
    """{normalized name: (version, [sha256 hashes])} of a `uv pip compile --generate-hashes` file, as pip installs
    it on CPython 3.11 on Linux (entries whose environment marker excludes that are read, then dropped)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    hashes: list[str] = []
    for line in path.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^]]*\])?==([^\s;\\]+)(?: ; ([^\\]+))?", line):
            name, hashes = normalize(match.group(1)), []
            if match.group(4) is None or Marker(match.group(4).strip()).evaluate(TARGET):
                assert name not in entries, f"{path.name}: {name} twice"
                entries[name] = (match.group(3), hashes)
        elif match := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line):
            hashes.append(match.group(1))
        else:
            assert not line or line.startswith(("#", " ")), f"{path.name}: unexpected line {line!r}"
    return entries


def requirements() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9._-]+)(\[[^]]*\])?==(\S+)", line.strip())
            assert match, f"requirements.txt: not an exact pin: {line!r}"
            pins[normalize(match.group(1))] = match.group(3)
    return pins


def recipe(target: str) -> str:
    text = MAKEFILE.read_text()
    start = re.search(rf"^{re.escape(target)}:.*$", text, re.MULTILINE)
    assert start, f"Makefile: no rule for {target}"
    body = re.match(r"(?:\n\t.*)*", text[start.end():])
    assert body is not None
    return start.group(0) + body.group(0)


def test_every_requirement_is_pinned_in_the_lock_at_the_same_version_with_hashes() -> None:
    lock = lock_file(ROOT / "requirements.lock")

    for name, version in requirements().items():
        assert name in lock, f"{name} is not in requirements.lock: run `make lock`"
        assert lock[name][0] == version, f"{name}: {version} in requirements.txt, {lock[name][0]} in the lock"
    assert {"setuptools", "wheel"} <= set(lock)  # build tools, so nothing is installed unchecked
    assert len(lock) > len(requirements())  # the transitive dependencies too


def test_every_locked_package_has_a_hash_and_the_locks_agree() -> None:
    full = lock_file(ROOT / "requirements.lock")
    for name in LOCKS:
        lock = lock_file(ROOT / name)
        assert lock, name
        for package, (version, hashes) in lock.items():
            assert hashes, f"{name}: {package}=={version} has no hash"
            assert full.get(package, ("", []))[0] == version, f"{name}: {package}=={version} differs from the full lock"
    assert set(lock_file(ROOT / "requirements-build.lock")) >= {"setuptools", "wheel"}
    # numpy and pandas held on the lines PySpark 4.1's conversions are tested with: see requirements.txt
    assert full["numpy"][0].startswith("2.2.") and full["pandas"][0].startswith("2.3.")


def test_setup_installs_the_locks_with_require_hashes() -> None:
    rule = recipe("$(VENV)/.installed")
    prerequisites = rule.splitlines()[0].split(":", 1)[1].split()

    assert {"requirements.lock", "requirements-build.lock", "requirements-tools.lock", "pyproject.toml"
            } <= set(prerequisites)
    # the installer (uv, at the Makefile's pinned version) by pip, hash-checked; then everything else by it
    assert "$(PY) -m pip install -q --require-hashes -r requirements-tools.lock" in rule
    assert re.search(r"^VENV_UV := \$\(VENV\)/bin/uv pip install -q --python \$\(PY\)$", MAKEFILE.read_text(),
                     re.MULTILINE)
    assert "$(VENV_UV) --require-hashes -r requirements-build.lock" in rule
    assert "$(VENV_UV) --require-hashes --no-build-isolation -r requirements.lock" in rule
    assert "$(VENV_UV) --no-deps --no-build-isolation -e ." in rule
    assert rule.index("requirements-tools.lock\n") < rule.index("requirements-build.lock\n") < rule.index(
        "-r requirements.lock")
    version = re.search(r"^UV_VERSION := (.*)$", MAKEFILE.read_text(), re.MULTILINE)
    tools = lock_file(ROOT / "requirements-tools.lock")
    assert version and set(tools) == {"uv"} and tools["uv"][0] == version.group(1) and tools["uv"][1]
    assert "-r requirements.txt" not in MAKEFILE.read_text()
    assert "--require-hashes" in recipe("$(RIE)")  # the emulator's wheel (aws-sam-cli) too
    lock = recipe("lock")
    assert "$(COMPILE) --universal requirements.txt" in lock and "-o requirements-runtime.lock" in lock
    assert re.search(r"^COMPILE = \$\(UV\) pip compile .*--generate-hashes", MAKEFILE.read_text(), re.MULTILINE)
    assert re.search(r"^UV_VERSION := \d+\.\d+\.\d+$", MAKEFILE.read_text(), re.MULTILINE)  # a pinned tool
    digest = re.search(r"^digest = (.*)$", MAKEFILE.read_text(), re.MULTILINE)
    assert digest and "crane digest" in digest.group(1) and "imagetools inspect" in digest.group(1)
    assert "$(call digest,$$ref)" in recipe("pin-images")


def test_maven_runs_with_strict_checksums_and_the_jars_are_verified() -> None:
    mvn = re.search(r"^MVN := (.*)$", MAKEFILE.read_text(), re.MULTILINE)

    assert mvn and " -C " in f" {mvn.group(1)} "
    assert "$(PYTHON) scripts/verify_jars.py $(JARS)" in recipe("$(JARS)/.fetched")
    assert "docker/jars.sha256" in recipe("$(JARS)/.fetched").splitlines()[0]
    manifest = verify_jars.read_manifest(ROOT / "docker" / "jars.sha256")
    assert {n for n in manifest if not n.startswith("elasticmq/")} == {
        "spark/iceberg-spark-runtime-4.1_2.13-1.12.0.jar", "spark/iceberg-aws-bundle-1.12.0.jar",
        "spark/spark-avro_2.13-4.1.1.jar", "nessie/nessie-quarkus-0.99.0-runner.jar"}
    # the local stack's queue server with its runtime dependencies (the pom's `elasticmq` profile), all checked too
    assert "elasticmq/elasticmq-server_2.13-1.7.1.jar" in manifest
    assert "-P elasticmq dependency:copy-dependencies" in recipe("$(JARS)/.fetched")


def _jars(folder: Path) -> dict[str, str]:
    """Three small stand-in jars in folder/spark and their manifest entries."""
    (folder / "spark").mkdir(parents=True)
    wanted = {}
    for index in range(3):
        path = folder / "spark" / f"lib-{index}.jar"
        path.write_bytes(bytes(range(256)) * (index + 1))
        wanted[f"spark/{path.name}"] = verify_jars.sha256(path)
    return wanted


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_verify_jars_accepts_the_listed_jars_and_refuses_a_tampered_missing_or_extra_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wanted = _jars(tmp_path / "jars")
    manifest = tmp_path / "jars.sha256"
    manifest.write_text("# comment\n" + "".join(f"{digest}  {name}\n" for name, digest in wanted.items()))
    args = ["--manifest", str(manifest)]

    assert verify_jars.main([*args, str(tmp_path / "jars")]) == 0
    assert verify_jars.main([*args, "--group", "spark", str(tmp_path / "jars" / "spark")]) == 0

    _flip_a_byte(tmp_path / "jars" / "spark" / "lib-1.jar")
    assert verify_jars.main([*args, str(tmp_path / "jars")]) == 1
    assert "spark/lib-1.jar: sha256" in capsys.readouterr().err

    (tmp_path / "jars" / "spark" / "lib-1.jar").unlink()
    (tmp_path / "jars" / "spark" / "extra.jar").write_bytes(b"PK")
    assert verify_jars.main([*args, str(tmp_path / "jars")]) == 1
    err = capsys.readouterr().err
    assert "jars/spark/lib-1.jar: missing" in err and "jars/spark/extra.jar: not in the manifest" in err


def test_verify_jars_refuses_a_tampered_copy_of_a_real_jar(tmp_path: Path) -> None:
    name = "spark/spark-avro_2.13-4.1.1.jar"  # the smallest of the pinned jars (0.1 MB)
    if not (JARS / name).is_file():
        pytest.skip("no .cache/jars: `make jars` fetches them")
    digest = verify_jars.read_manifest(ROOT / "docker" / "jars.sha256")[name]
    (tmp_path / "spark").mkdir()
    shutil.copyfile(JARS / name, tmp_path / name)
    manifest = tmp_path / "jars.sha256"
    manifest.write_text(f"{digest}  {name}\n")

    assert verify_jars.main(["--manifest", str(manifest), str(tmp_path)]) == 0
    _flip_a_byte(tmp_path / name)
    assert verify_jars.main(["--manifest", str(manifest), str(tmp_path)]) == 1
