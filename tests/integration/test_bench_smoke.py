"""A smoke run of the benchmark (tiny sizes, one repetition, its own stack): the harness works end to end and
writes a well-formed report. The real numbers come from `make bench`, never from the test suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_smoke_run_writes_results_and_targets(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAP_", "AWS_", "SOURCE_", "LAKE_", "NESSIE_"))}
    result = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert set(report["results"]) == {"small_file", "audit_cost", "burst"}
    assert report["results"]["burst"]["files"] == 3
    names = [t["name"] for t in report["targets"]]
    assert names[0] == "warm small-file latency / baseline" and len(names) == 5
    assert all(set(t) >= {"name", "value", "target", "met"} for t in report["targets"])
    assert "| warm small-file latency / baseline |" in (tmp_path / "latest.md").read_text()
