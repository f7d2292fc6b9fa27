"""A crashed execution environment's batch, end to end: its messages come back after the stack's visibility timeout,
are published exactly once, and the dead run's batch branch is deleted as abandoned.

A stack of its own with test-sized settings, in the order the stack requires them (WAP_STACK_VISIBILITY_SECONDS above
WAP_ABANDONED_BRANCH_SECONDS, as AWS's 5,400 s is above the default 960 s): abandoned after 8 s, visible again after
40 s. A warm environment (one file published first) is handed a batch of files of one table; once the batch's branch
(`wap-<table>-<digest>-b...`) is in the catalog, the environment's processes (awslambdaric, its Spark JVM and its
worker processes) are killed with SIGKILL, mid-batch. Then:
- `wap stack status` (the CLI, in a process of its own) reports the batch's messages in flight, and when they come
  back, while they are out;
- they come back no earlier than that, to a fresh environment, and every file's rows are on main exactly once;
- the dead run's branch, older than the abandoned threshold by then, is deleted by the run the messages start: no
  `wap-` branch of the table is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
import requests

from tests.conftest import AUDITS
from tests.stacks import crash_stack
from tests.stacks import small_parquet as parquet
from tests.waiting import wait_for
from wap_stack.components import ACCESS_KEY, SECRET_KEY
from wap_stack.runtime import environment_processes
from wap_stack.stack import StackConfig
from wap_stack.state import StackState, stack_environment

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ABANDONED, VISIBILITY = 8, 40  # 40 s: both status reads fit in the window on a loaded machine (20 s did not)
TABLE, FILES, ROWS = "crashed_batch", 12, 500


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig, StackState]]:
    with crash_stack(tmp_path_factory.mktemp("crashed-batch"), abandoned=ABANDONED, visibility=VISIBILITY) as stack:
        yield stack


def worker_log(config: StackConfig) -> list[dict[str, Any]]:
    log = config.state_dir / "logs" / "worker.log"
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")] if log.exists() else []


def outcomes(config: StackConfig, table: str) -> list[dict[str, Any]]:
    """The function's outcomes for the files of `table`, in the order the worker logged them."""
    return [o for line in worker_log(config) for o in line.get("objects") or [] if o.get("table") == f"wap.{table}"]


def branches_of(state: StackState, table: str) -> list[str]:
    """The catalog's WAP branches of `table` (Nessie's API, as any client sees them)."""
    with requests.Session() as session:
        session.trust_env = False
        answer = session.get(f"{state.nessie_url}/api/v2/trees", timeout=10)
    answer.raise_for_status()
    return [r["name"] for r in answer.json()["references"] if r["name"].startswith(f"wap-{table}-")]


def wap(state: StackState, *args: str) -> subprocess.CompletedProcess[str]:
    """A `wap` command as a developer runs it in a shell where `wap stack env` was exported."""
    env = os.environ | stack_environment(state) | {"WAP_AUDITS_FILE": str(AUDITS)}
    return subprocess.run([sys.executable, "-m", "wap_ingest.entrypoints.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_a_batch_killed_mid_run_comes_back_after_the_visibility_timeout_and_is_published_once(
        stack: tuple[StackConfig, StackState]) -> None:
    config, state = stack
    s3 = boto3.client("s3", endpoint_url=state.moto_url, region_name=state.region, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY)
    s3.put_object(Bucket=config.source_bucket, Key="crash_warm/a.parquet", Body=parquet(3, 0))
    wait_for(lambda: [o for o in outcomes(config, "crash_warm") if o["status"] == "published"],
             "a first file published (a warm environment: Spark started)", timeout=300)

    with ThreadPoolExecutor(FILES) as pool:  # at once, so that they reach the function as one batch
        list(pool.map(lambda n: s3.put_object(Bucket=config.source_bucket, Key=f"{TABLE}/part-{n:02d}.parquet",
                                              Body=parquet(ROWS, n * ROWS)), range(FILES)))
    [dead] = wait_for(lambda: [b for b in branches_of(state, TABLE) if "-b" in b.removeprefix(f"wap-{TABLE}-")],
                      "the batch's branch in the catalog", timeout=120, every=0.1)
    victims = environment_processes(config.runtime_port)  # awslambdaric, its JVM, its worker processes
    assert len(victims) >= 2, victims
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    assert dead in branches_of(state, TABLE)  # the dead run left it behind

    def reported() -> dict[str, Any] | None:
        status = json.loads(wap(state, "stack", "status", "--json").stdout)
        messages = status["messages"] or {}
        crashed = [b for b in messages.get("batches") or () if b["state"] == "crashed"]
        return status if crashed and (messages.get("in_flight") or 0) >= crashed[0]["messages"] else None

    status = wait_for(reported, "`wap stack status` reporting the crashed batch's messages in flight", timeout=60)
    messages = status["messages"]
    [batch] = [b for b in messages["batches"] if b["state"] == "crashed"]
    print(json.dumps(messages, indent=2))
    assert messages["visibility_seconds"] == VISIBILITY
    assert batch["back_at"] - batch["received_at"] == pytest.approx(VISIBILITY, abs=0.01)
    assert "SIGKILL" in batch["crash"], batch
    assert time.time() < batch["back_at"], "the status was read after the messages came back"
    text = wap(state, "stack", "status").stdout
    assert "message(s) crashed (the runtime exited (exit signal 9 (SIGKILL))); if not deleted, they come back at" \
        in text, text

    def settled() -> list[dict[str, Any]] | None:
        done = {o["object"]: o["status"] for o in outcomes(config, TABLE) if o["status"] in ("published", "duplicate")}
        return list(done) if len(done) == FILES else None

    wait_for(settled, "every file of the batch published after it came back", timeout=600)
    assert time.time() >= batch["back_at"], "the messages came back before their visibility timeout"
    tables = {t["table"]: t for t in json.loads(wap(state, "tables", "--json").stdout)["tables"]}
    assert tables[f"wap.{TABLE}"]["rows_on_main"] == FILES * ROWS  # every file's rows, exactly once
    assert branches_of(state, TABLE) == []  # the dead run's branch, abandoned by then, was deleted
    published = [o["object"] for o in outcomes(config, TABLE) if o["status"] == "published"]
    assert len(published) == len(set(published)), published  # no file published twice
