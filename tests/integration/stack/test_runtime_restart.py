"""The local stack treats a crashed function as Lambda does: SIGKILL the runtime (awslambdaric and its Spark JVM)
of a warm execution environment, and the next invocation gets a fresh environment (a cold start) instead of the
stack staying broken; the crashed batch's message comes back after its visibility timeout and is published; and
`wap stack status` says what happened. A stack of its own, with a short visibility timeout."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import AUDITS
from tests.stacks import running_stack
from wap_stack.runtime import environment_processes
from wap_stack.stack import StackConfig, free_ports
from wap_stack.state import StackState
from wap_stack.status import stack_status

pytestmark = [pytest.mark.stack, pytest.mark.spark]
VISIBILITY = 25


@pytest.fixture(scope="module")
def crash_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig, StackState]]:
    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=tmp_path_factory.mktemp("crash-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=mgmt, slack_port=slack, lambda_port=function, runtime_port=runtime,
                         visibility_seconds=VISIBILITY)
    # abandoned below the short visibility timeout, as the stack requires
    with running_stack(config, {"WAP_AUDITS_FILE": str(AUDITS), "WAP_ABANDONED_BRANCH_SECONDS": "20"},
                       unset=("WAP_SOURCE_BUCKETS", "WAP_LARGE_FILE_BYTES")) as state:
        yield config, state


def parquet(rows: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"my_col_0": list(range(rows)), "my_col_1": [f"v{i}" for i in range(rows)]}), sink)
    return sink.getvalue()


def published(config: StackConfig, table: str) -> bool:
    """The worker recorded the function's outcome `published` for a file of `table`."""
    log = config.state_dir / "logs" / "worker.log"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")] if log.exists() else []
    return any(o.get("table") == f"wap.{table}" and o.get("status") == "published"
               for line in lines for o in line.get("objects") or [])


def wait_for(check: Any, what: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_runtime_is_replaced_and_the_next_files_are_published(
        crash_stack: tuple[StackConfig, StackState]) -> None:
    config, _state = crash_stack
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{config.moto_port}", region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.put_object(Bucket=config.source_bucket, Key="before_crash/a.parquet", Body=parquet(3))
    wait_for(lambda: published(config, "before_crash"), "the first file published (a warm environment)")

    victims = environment_processes(config.runtime_port)  # awslambdaric and its JVM, not the emulator
    assert len(victims) >= 2, victims
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()

    s3.put_object(Bucket=config.source_bucket, Key="after_crash/b.parquet", Body=parquet(5))
    wait_for(lambda: published(config, "after_crash"), "the next file published by a fresh environment", 300)
    # the invocation that met the dead runtime failed; its message came back after the visibility timeout
    assert time.monotonic() - killed_at >= VISIBILITY - 5
    worker_log = (config.state_dir / "logs" / "worker.log").read_text()
    assert '"event": "environment_restarted"' in worker_log
    status = stack_status(config)
    assert status.healthy, status.summary
    [function] = [c for c in status.components if c.process == "lambda"]
    assert "restarted after a crash" in function.health and "1 restart" in function.health
    assert not set(victims) & set(environment_processes(config.runtime_port))  # the dead ones are gone
    assert Path(config.state_file).exists()
