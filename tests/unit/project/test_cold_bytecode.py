"""benchmarks/cold_start.compile_bytecode: a cold process measured by the benchmark imports bytecode, as the image's
does, even where this machine never writes it (PYTHONDONTWRITEBYTECODE) or it is older than the source."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from benchmarks.cold_start import compile_bytecode


def test_every_module_gets_fresh_bytecode_whatever_the_environment_says(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text("VALUE = 1\n")
    stale = Path(importlib.util.cache_from_source(str(module)))
    stale.parent.mkdir()
    stale.write_bytes(b"stale")
    os.utime(stale, (1, 1))  # older than its source
    compile_bytecode([tmp_path])
    for source in (package / "__init__.py", module):
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime
    assert stale.read_bytes() != b"stale"
