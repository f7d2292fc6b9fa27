"""A run killed (SIGKILL) at each step, of one file or of a batch, is completed or cleanly redone by the redelivered
event: exact rows on main, and no branch left behind once the redelivery has run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.paths import ROOT
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]


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
    kill_at(step, tmp_path / "reached", source.bucket, [source.key])
    prefix = f"wap-{table_name}-"
    expected_main = 4 + (9 if step == "after_merge" else 0)
    assert lake.count(f"wap.{table_name}") == expected_main
    assert len([b for b in lake.wap_branches() if b.startswith(prefix)]) == 1  # the attempt the kill left

    outcome = lake.service.ingest(source)  # the event, redelivered
    assert outcome.status is redelivered_as, outcome.message
    assert lake.count(f"wap.{table_name}") == 4 + 9
    assert [b for b in lake.wap_branches() if b.startswith(prefix)] == []


def kill_at(step: str, marker: Path, bucket: str, keys: list[str]) -> None:
    """Run the harness on these objects and SIGKILL its whole process group (Python and its JVM) at `step`."""
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_harness", step, str(marker), bucket, *keys],
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


BATCH_STEPS = [  # (where the batch is killed, how many of its files were on main then)
    ("after_branch", 0), ("after_append", 0), ("after_audit", 0), ("after_merge", 3),
    ("after_branch:2", 3),  # the group merged; its rejected file was running alone on a branch of its own
]


@pytest.mark.parametrize(("step", "on_main_at_kill"), BATCH_STEPS)
def test_a_batch_killed_at_each_step_leaves_nothing_the_redelivery_does_not_clean_up(
    lake: Lake, table_name: str, tmp_path: Path, step: str, on_main_at_kill: int
) -> None:
    lake.service.ingest(lake.put(f"{table_name}/earlier.parquet", parquet_bytes(4)))  # the table exists
    good = [lake.put(f"{table_name}/g{i}.parquet", parquet_bytes(5)) for i in range(3)]
    bad = lake.put(f"{table_name}/bad.parquet", parquet_bytes(5, nulls=2))
    sources = [*good, bad]
    kill_at(step, tmp_path / "reached", lake.inbox_bucket, [s.key for s in sources])
    prefix = f"wap-{table_name}-"
    assert lake.count(f"wap.{table_name}") == 4 + 5 * on_main_at_kill
    assert [b for b in lake.wap_branches() if b.startswith(prefix)]  # the kill left a branch behind

    # SQS redelivers the messages after their visibility timeout, which is longer than any run may take: by then
    # the dead run's batch branch is older than WAP_ABANDONED_BRANCH_SECONDS (shortened here, not the wait)
    time.sleep(1.1)
    redelivery = lake.service.replaced(config=replace(lake.service.config, abandoned_after_seconds=1.0))
    results = redelivery.ingest_all([Item(s) for s in sources])
    statuses = [r.status for r in results if isinstance(r, IngestOutcome)]
    assert statuses[:3] == [OutcomeStatus.DUPLICATE if on_main_at_kill else OutcomeStatus.PUBLISHED] * 3
    assert statuses[3] is OutcomeStatus.REJECTED
    assert lake.count(f"wap.{table_name}") == 4 + 15  # each good file exactly once
    left = [b for b in lake.wap_branches() if b.startswith(prefix)]
    rejected = results[3]
    assert isinstance(rejected, IngestOutcome) and left == [rejected.branch]  # only the rejected file's, for review
