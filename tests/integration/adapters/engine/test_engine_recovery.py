"""The Spark JVM of a warm process dies mid-file (a real SIGKILL): that file is an infrastructure failure, retried;
the next file in the same process gets a fresh engine and is published (a dead session is never kept)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.paths import ROOT
from wap_ingest.core.models import OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_a_dead_jvm_fails_its_file_and_the_next_file_gets_a_fresh_engine(lake: Lake, table_name: str) -> None:
    """`before` makes the table (the engine starts); `during` goes to a new table, which its registration asks the
    engine to make: the JVM dies there; `after` makes that table with a fresh engine."""
    first, second = f"{table_name}_a", f"{table_name}_b"
    keys = [lake.put(f"{table}/{name}.parquet", parquet_bytes(n)).key
            for table, name, n in ((first, "before", 3), (second, "during", 5), (second, "after", 7))]
    run = subprocess.run([sys.executable, "-m", "tests.integration.engine_harness", lake.inbox_bucket, *keys],
                         cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    before, during, after = (json.loads(line) for line in run.stdout.splitlines() if line.startswith("{"))
    assert before["status"] == "published" and before["restarts"] == 0
    assert during["status"] == "failed" and during["error"] == "EngineLostError", during
    assert after["status"] == "published" and after["restarts"] == 1, after
    assert "registered (" in before["message"] and "registered (" in after["message"], (before, after)
    assert (lake.count(f"wap.{first}"), lake.count(f"wap.{second}")) == (3, 7)  # the failed file left nothing
    assert [b for b in lake.wap_branches() if table_name in b] == []
    redelivered = lake.service.ingest(lake.service.objects.head(lake.inbox_bucket, keys[1]))
    assert redelivered.status is OutcomeStatus.PUBLISHED
    assert lake.count(f"wap.{second}") == 5 + 7
