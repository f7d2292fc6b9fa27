"""scripts/test_durations.py: each test file's time, the mean over the JUnit reports given, slowest first."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.paths import ROOT


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_durations", ROOT / "scripts" / "test_durations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(path: Path, cases: list[tuple[str, float]]) -> Path:
    body = "".join(f'<testcase classname="{c}" name="t{i}" time="{t}"/>' for i, (c, t) in enumerate(cases))
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_the_mean_over_reports_slowest_first_a_class_counted_with_its_module(tmp_path: Path) -> None:
    script = _script()
    one = _report(tmp_path / "one.xml", [("tests.e2e.test_a", 10.0), ("tests.e2e.test_a", 20.0),
                                        ("tests.unit.test_b.TestThing", 100.0), ("tests.unit.test_c", 1.0)])
    two = _report(tmp_path / "two.xml", [("tests.e2e.test_a", 90.0), ("tests.unit.test_b.TestThing", 20.0)])

    found = script.mean_seconds([one, two])

    assert found == {"tests/e2e/test_a.py": 60, "tests/unit/test_b.py": 60}  # (30 + 90) / 2, (100 + 20) / 2
    assert "tests/unit/test_c.py" not in found  # 0.5 s on average: under LISTED_ABOVE_S, left to the tail
    faster = _report(tmp_path / "three.xml", [("tests.e2e.test_a", 1.0), ("tests.unit.test_b.TestThing", 300.0)])
    assert list(script.mean_seconds([faster])) == ["tests/unit/test_b.py"]
