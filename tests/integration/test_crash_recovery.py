"""A run killed (SIGKILL) at each step is completed or cleanly redone by the redelivered event: exact rows
on main, and no branch left for the object."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.models import OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("step", "redelivered_as"),
    [
        ("after_branch", OutcomeStatus.PUBLISHED),
        ("after_append", OutcomeStatus.PUBLISHED),
        ("after_audit", OutcomeStatus.PUBLISHED),
        ("after_merge", OutcomeStatus.DUPLICATE),
    ],
)
def test_a_run_killed_at_each_step_is_recovered_by_redelivery(
    lake: Lake, table_name: str, tmp_path: Path, step: str, redelivered_as: OutcomeStatus
) -> None:
    lake.service.ingest(lake.put(f"{table_name}/earlier.parquet", parquet_bytes(4)))  # the table exists
    source = lake.put(f"{table_name}/victim.parquet", parquet_bytes(9))
    marker = tmp_path / "reached"
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_harness", step, source.bucket, source.key, str(marker)],
        cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert victim.poll() is None, victim.stderr.read().decode()[-2000:] if victim.stderr else ""
            assert time.monotonic() < deadline, f"the harness never reached {step}"
            time.sleep(0.2)
        os.killpg(victim.pid, signal.SIGKILL)  # a real kill, mid-run
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
    prefix = f"wap-wap-{table_name}-"
    expected_main = 4 + (9 if step == "after_merge" else 0)
    assert lake.count(f"wap.{table_name}") == expected_main
    assert len([b for b in lake.wap_branches() if b.startswith(prefix)]) == 1  # the attempt the kill left

    outcome = lake.service.ingest(source)  # the event, redelivered
    assert outcome.status is redelivered_as, outcome.message
    assert lake.count(f"wap.{table_name}") == 4 + 9
    assert [b for b in lake.wap_branches() if b.startswith(prefix)] == []
