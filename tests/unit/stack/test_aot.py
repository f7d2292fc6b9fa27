"""The stack's JVM servers start on their AOT cache when `make setup` built one for exactly their java, jars and JVM
flags (wap_stack/aot.py), and as before otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wap_stack import aot


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    monkeypatch.setattr(aot, "cache_dir", lambda: tmp_path / "aot")
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("a.jar", "b.jar"):
        (jars / name).write_bytes(b"jar " + name.encode())
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    (tmp_path / "jdk" / "release").write_text('JAVA_VERSION="25.0.1"\n')
    return jars, [str(java), "-Xmx256m", "-XX:+UseSerialGC", "-Dport=1", "-cp", f"{jars}/*", "Main"]


def test_without_a_built_cache_the_command_is_unchanged(world: tuple[Path, list[str]]) -> None:
    _, command = world
    assert aot.with_cache("queue", command) == command


def test_a_built_cache_is_named_right_after_the_java(world: tuple[Path, list[str]]) -> None:
    _, command = world
    path = aot.cache_path("queue", command)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"cache")
    assert aot.with_cache("queue", command) == [command[0], f"-XX:AOTCache={path}", *command[1:]]


def test_the_key_follows_the_jars_and_the_jvm_flags_not_the_settings(world: tuple[Path, list[str]]) -> None:
    jars, command = world
    key = aot.cache_path("queue", command)
    assert aot.cache_path("queue", [*command[:3], "-Dport=2", *command[4:]]) == key  # another stack's ports
    assert aot.cache_path("queue", [command[0], "-Xmx512m", *command[2:]]) != key
    assert aot.cache_path("nessie", command) != key
    stat = (jars / "b.jar").stat()
    os.utime(jars / "b.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a jar fetched again
    assert aot.cache_path("queue", command) != key


def test_a_missing_java_or_jar_gives_no_cache(world: tuple[Path, list[str]], tmp_path: Path) -> None:
    _, command = world
    assert aot.cache_path("nessie", [str(tmp_path / "no-java"), "-jar", "x.jar"]) is None
    assert aot.cache_path("nessie", [command[0], "-jar", str(tmp_path / "gone.jar")]) is None
