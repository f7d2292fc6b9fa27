"""The driver JVM's cold-start options (adapters/engine/session.py): which archive a JVM and classpath get, and the
options the session passes. The archive itself, built and mapped by a real JVM:
tests/integration/adapters/engine/test_class_data_archive.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from wap_ingest.adapters.engine.session import (
    SHORT_RUN_JIT,
    SMALL_FOOTPRINT_GC,
    SparkSettings,
    archive_dir_for,
    archive_key,
    spark_conf_for,
    startup_java_options,
    tuning_from,
    with_java_options,
)
from wap_ingest.core.errors import ConfigError


def _java_and_jars(root: Path) -> tuple[Path, Path, list[Path]]:
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    (root / "jdk" / "release").write_text('JAVA_VERSION="17.0.15"\n')
    (root / "jdk" / "lib" / "server").mkdir(parents=True)
    (root / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    (root / "spark" / "jars").mkdir(parents=True)
    (root / "spark" / "jars" / "spark-core.jar").write_bytes(b"core")
    (root / "jars" / "spark").mkdir(parents=True)
    jars = [root / "jars" / "spark" / "iceberg.jar", root / "jars" / "spark" / "nessie.jar"]
    for jar in jars:
        jar.write_bytes(b"jar")
    return java, root / "spark", jars


def test_the_key_follows_the_jvm_and_every_jar_and_nothing_else(tmp_path: Path) -> None:
    java, home, jars = _java_and_jars(tmp_path)
    key = archive_key(java, home, jars)
    assert key == archive_key(java, home, list(reversed(jars)))  # the jars' order does not matter
    changed = []
    for path, content in ((jars[0], b"jar, rebuilt"), (home / "jars" / "spark-core.jar", b"core 2"),
                          (tmp_path / "jdk" / "release", b'JAVA_VERSION="17.0.16"\n'),
                          (tmp_path / "jdk" / "lib" / "server" / "libjvm.so", b"jvm 2")):
        path.write_bytes(content)
        changed.append(archive_key(java, home, jars))
    assert len({key, *changed}) == 5
    (home / "jars" / "spark-sql.jar").write_bytes(b"sql")  # a jar more
    assert archive_key(java, home, jars) not in {key, *changed}


def test_the_archive_lives_beside_the_jars_folder(tmp_path: Path) -> None:
    assert archive_dir_for([tmp_path / "jars" / "spark" / "a.jar"]) == (tmp_path / "jars" / "cds").resolve()
    assert archive_dir_for([Path("/opt/wap/jars/a.jar")]) == Path("/opt/wap/cds")
    assert archive_dir_for([]) is None


def test_the_driver_options_add_the_archive_and_the_jit_flags_to_the_existing_ones(tmp_path: Path) -> None:
    archive = tmp_path / "spark-k.jsa"
    conf = with_java_options({"spark.driver.extraJavaOptions": "-Djava.io.tmpdir=/tmp/x"},
                             startup_java_options(archive))
    assert conf["spark.driver.extraJavaOptions"].split() == [
        "-Djava.io.tmpdir=/tmp/x", f"-XX:SharedArchiveFile={archive}", *SHORT_RUN_JIT, *SMALL_FOOTPRINT_GC]
    assert startup_java_options(None) == [*SHORT_RUN_JIT, *SMALL_FOOTPRINT_GC]  # no archive: the JVM starts without one


def test_the_cuts_are_on_unless_turned_off() -> None:
    assert tuning_from({}) and tuning_from({"WAP_SPARK_STARTUP_TUNING": "on"})
    assert not tuning_from({"WAP_SPARK_STARTUP_TUNING": "off"})
    with pytest.raises(ConfigError, match="WAP_SPARK_STARTUP_TUNING"):
        tuning_from({"WAP_SPARK_STARTUP_TUNING": "maybe"})


def test_the_jars_join_the_driver_classpath_only_when_they_are_local(tmp_path: Path) -> None:
    """The archive maps classes of the driver's classpath; an EMR job (no local jars) keeps the cluster's own."""
    jars = (tmp_path / "a.jar", tmp_path / "b.jar")
    settings = SparkSettings(nessie_uri="http://127.0.0.1:19120/api/v2", main_branch="main", warehouse="s3://lake/w",
                             region="us-east-1", s3_endpoint=None, http_timeout=5.0, driver_memory="1g",
                             work_dir=tmp_path, jars=jars)
    assert spark_conf_for(settings)["spark.driver.extraClassPath"] == f"{jars[0]}:{jars[1]}"
    assert "spark.driver.extraClassPath" not in spark_conf_for(settings, local_jars=False)
    assert "spark.driver.extraClassPath" not in spark_conf_for(replace(settings, jars=()))
