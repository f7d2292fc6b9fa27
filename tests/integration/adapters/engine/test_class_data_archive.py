"""The driver's class-data sharing archive that `make setup` builds (scripts/build_cds_archive.py) exists for this java
and classpath, a JVM maps it, and the service's SparkSession starts with it: with -Xshare:on a JVM that cannot use
its archive refuses to start, so each check fails if the archive is missing, stale or broken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wap_ingest.adapters.engine.session import archive_complete, archive_path_for, class_data_archive, spark_java
from wap_stack.config import repo_root

pytestmark = pytest.mark.spark

JARS = sorted((repo_root() / ".cache" / "jars" / "spark").glob("*.jar"))
FIX = "Fix: make cds (a part of make setup) builds it."


@pytest.fixture(scope="module")
def archive() -> Path:
    found = class_data_archive(JARS, os.environ)
    assert found is not None, f"no class-data archive at {archive_path_for(JARS, os.environ)}. {FIX}"
    return found


def _java(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    java = spark_java(os.environ)
    assert java is not None
    return subprocess.run([str(java), *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd)


def test_a_jvm_maps_the_archive_and_loads_spark_from_it(archive: Path, tmp_path: Path) -> None:
    classpath = json.loads(archive.with_suffix(".json").read_text())["classpath"]
    done = _java(f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-Xlog:class+load=info", "-cp", classpath,
                 "org.apache.spark.deploy.SparkSubmit", "--version", cwd=tmp_path)
    assert done.returncode == 0, f"the JVM refuses {archive}: {done.stdout[-800:]}{done.stderr[-800:]} {FIX}"
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file (top)" in done.stdout


def test_a_truncated_archive_is_not_used_and_a_damaged_one_is_refused(archive: Path, tmp_path: Path) -> None:
    """Java 17 would crash (SIGBUS) mapping a truncated archive: the session checks the size its build recorded.
    A damaged header is the JVM's to refuse."""
    data = archive.read_bytes()
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(data[: 1 << 20])
    truncated.with_suffix(".json").write_text(archive.with_suffix(".json").read_text())
    assert archive_complete(archive) and not archive_complete(truncated)
    damaged = tmp_path / "damaged.jsa"
    damaged.write_bytes(bytes(16) + data[16:])
    assert _java(f"-XX:SharedArchiveFile={damaged}", "-Xshare:on", "-version", cwd=tmp_path).returncode != 0


SESSION = """
import json, sys
from pathlib import Path
from wap_ingest.adapters.engine.session import SparkSettings, spark_conf_for, spark_session_for, with_java_options
jars, work = tuple(Path(j) for j in sys.argv[1].split(",")), Path(sys.argv[2])
settings = SparkSettings(nessie_uri="http://127.0.0.1:9/api/v2", main_branch="main", warehouse="s3://lake/warehouse",
                         region="us-east-1", s3_endpoint=None, http_timeout=5.0, driver_memory="1g", work_dir=work,
                         jars=jars)
conf = with_java_options(spark_conf_for(settings), ["-Xshare:on"])  # the service's settings, and no sharing: no JVM
spark = spark_session_for(conf, work_dir=work, tuning=True)
jvm = spark.sparkContext._jvm
arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print(json.dumps({"arguments": arguments, "rows": spark.range(3).count()}))
"""


def test_the_service_session_starts_its_driver_on_the_archive(archive: Path, tmp_path: Path) -> None:
    """-Xshare:on added to the session's options: the driver JVM would not start if it could not map the archive."""
    done = subprocess.run([sys.executable, "-c", SESSION, ",".join(map(str, JARS)), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                          env=os.environ | {"WAP_SPARK_STARTUP_TUNING": "on"})
    assert done.returncode == 0, done.stderr[-2000:]
    started = json.loads(done.stdout.strip().splitlines()[-1])
    assert f"-XX:SharedArchiveFile={archive}" in started["arguments"] and "-Xshare:on" in started["arguments"]
    assert started["rows"] == 3
