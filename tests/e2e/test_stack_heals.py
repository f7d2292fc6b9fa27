"""A crashed part of the stack comes back on its own store without losing the lake (issue 34, item 3).

A stack of its own (one execution environment, WAP_ABANDONED_BRANCH_SECONDS 8 and the visibility timeout 20 s, as in
test_crashed_batch.py, so that a branch a run could not delete counts as abandoned soon). Files are dropped as a
producer drops them: S3 -> the queue server -> the worker -> the function.

- Nessie SIGKILLed in the middle of a burst of `FILES` files over `TABLES` tables: nobody but the stack's keeper
  starts it again (on its RocksDB store); every file is published exactly once (each object once among the outcomes;
  the rows on main, read through Nessie's Iceberg REST endpoint by PyIceberg, are files x rows), the dead-letter
  queue stays empty, and no batch branch is left (a branch whose clean-up met the outage is abandoned after 8 s: the
  next file of its table deletes it; the test says which were left before that).
- `wap stack up` on the stack with its keeper, Nessie and the queue server SIGKILLed starts exactly those again, on
  their stores: main's hash and rows unchanged, `wap stack status` healthy, the next file published.
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
from pyiceberg.catalog import load_catalog

from tests.stacks import crash_stack
from tests.stacks import small_parquet as parquet
from tests.waiting import wait_for
from wap_stack.components import ACCESS_KEY, SECRET_KEY
from wap_stack.config import StackConfig, repo_root
from wap_stack.processes import process_alive
from wap_stack.state import StackState, read_record, stack_environment

pytestmark = [pytest.mark.stack]
ABANDONED, VISIBILITY = 8, 20
FILES, TABLES, ROWS = 300, 3, 10


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig, StackState]]:
    with crash_stack(tmp_path_factory.mktemp("heals"), abandoned=ABANDONED, visibility=VISIBILITY,
                     env={"WAP_JARS_DIR": str(repo_root() / ".cache" / "jars" / "spark")}) as stack:
        yield stack


def client(state: StackState, service: str) -> Any:
    return boto3.client(service, endpoint_url=state.moto_url, region_name=state.region, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def outcomes(config: StackConfig) -> list[dict[str, Any]]:
    log = config.state_dir / "logs" / "worker.log"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")] if log.exists() else []
    return [o for line in lines for o in line.get("objects") or []]


def settled(config: StackConfig, prefix: str, count: int) -> dict[str, str] | None:
    done = {o["object"]: o["status"] for o in outcomes(config)
            if o["object"].startswith(prefix) and o["status"] in ("published", "duplicate")}
    return done if len(done) >= count else None


def rows_on_main(state: StackState, table: str) -> int:
    catalog = load_catalog("nessie", type="rest", uri=f"{state.nessie_url}/iceberg/main",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO", "s3.endpoint": state.moto_url,
                              "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
                              "s3.region": state.region})
    return int(catalog.load_table(f"wap.{table}").scan().to_arrow().num_rows)


def branches(state: StackState, prefix: str = "wap-") -> list[str]:
    with requests.Session() as session:
        session.trust_env = False
        answer = session.get(f"{state.nessie_url}/api/v2/trees", timeout=10)
    answer.raise_for_status()
    return sorted(r["name"] for r in answer.json()["references"] if r["name"].startswith(prefix))


def main_hash(state: StackState) -> str:
    with requests.Session() as session:
        session.trust_env = False
        return str(session.get(f"{state.nessie_url}/api/v2/trees/main", timeout=10).json()["reference"]["hash"])


def dead_letters(state: StackState) -> int:
    assert state.dead_letter_url
    attributes = client(state, "sqs").get_queue_attributes(
        QueueUrl=state.dead_letter_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def wap(config: StackConfig, *args: str) -> subprocess.CompletedProcess[str]:
    """`wap stack ...` as a developer runs it, for this stack's folder and ports."""
    env = os.environ | {"WAP_STACK_DIR": str(config.state_dir), "WAP_STACK_MOTO_PORT": str(config.moto_port),
                        "WAP_STACK_NESSIE_PORT": str(config.nessie_port),
                        "WAP_STACK_NESSIE_MGMT_PORT": str(config.nessie_management_port),
                        "WAP_STACK_SLACK_PORT": str(config.slack_port),
                        "WAP_STACK_LAMBDA_PORT": str(config.lambda_port),
                        "WAP_STACK_RUNTIME_PORT": str(config.runtime_port)}
    return subprocess.run([sys.executable, "-m", "wap_ingest.entrypoints.cli", "stack", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def pid_of(config: StackConfig, name: str) -> int:
    record = read_record(config)
    assert record is not None
    return int(record[f"{name}_pid"])


def test_nessie_killed_mid_burst_comes_back_by_itself_and_every_row_lands_once(
        stack: tuple[StackConfig, StackState]) -> None:
    config, state = stack
    s3 = client(state, "s3")
    s3.put_object(Bucket=config.source_bucket, Key="heal_warm/a.parquet", Body=parquet(3, 0))
    wait_for(lambda: settled(config, f"s3://{config.source_bucket}/heal_warm/", 1), "a warm environment",
             timeout=300)
    killed = pid_of(config, "nessie")
    keys = [(f"heal_{n % TABLES}/part-{n:04d}.parquet", n) for n in range(FILES)]

    def drop(item: tuple[str, int]) -> None:
        key, n = item
        s3.put_object(Bucket=config.source_bucket, Key=key, Body=parquet(ROWS, n * ROWS))

    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(drop, keys[: FILES // 3]))
        wait_for(lambda: len(outcomes(config)) > 5, "the first files of the burst handled", timeout=120, every=0.1)
        os.kill(killed, signal.SIGKILL)  # mid-burst: a third dropped, some handled, the rest to come
        killed_at = time.monotonic() - began
        list(pool.map(drop, keys[FILES // 3:]))

    wait_for(lambda: not process_alive("nessie", killed) and pid_of(config, "nessie") != killed
             and (read_record(config) or {}).get("restarts", {}).get("nessie"), "the keeper restarting Nessie",
             timeout=120)
    restart = (read_record(config) or {})["restarts"]["nessie"]
    assert restart["by"] == "keeper" and restart["failed"] is False, restart
    done = wait_for(lambda: settled(config, f"s3://{config.source_bucket}/heal_", FILES + 1), "every file settled",
                    timeout=900, every=1.0)
    drained = time.monotonic() - began
    published = [o["object"] for o in outcomes(config) if o["status"] == "published"
                 and o["object"].startswith(f"s3://{config.source_bucket}/heal_")]
    assert len(published) == len(set(published)) == FILES + 1, "a file published twice, or one never"
    assert set(done.values()) == {"published"}, {v: list(done.values()).count(v) for v in set(done.values())}
    for table in range(TABLES):
        files = len([k for k, _ in keys if k.startswith(f"heal_{table}/")])
        assert rows_on_main(state, f"heal_{table}") == files * ROWS  # every row, exactly once
    assert dead_letters(state) == 0
    left = branches(state, "wap-heal_")
    print(json.dumps({"files": FILES, "killed_at_s": round(killed_at, 1), "drained_s": round(drained, 1),
                      "nessie_restart": restart, "branches_left": left}, indent=2))
    if left:  # a run whose branch clean-up met the outage: abandoned after ABANDONED s, its table's next run sweeps it
        time.sleep(ABANDONED + 1)
        for name in {b.split("-")[1] for b in left}:
            s3.put_object(Bucket=config.source_bucket, Key=f"{name}/sweep.parquet", Body=parquet(ROWS, 10**6))
        wait_for(lambda: not branches(state, "wap-heal_"), f"the branches left by the outage ({left}) swept",
                 timeout=300)
    status = json.loads(wap(config, "status", "--json").stdout)
    assert status["healthy"], status["summary"]


def test_up_on_a_half_up_stack_starts_the_missing_parts_on_their_stores(
        stack: tuple[StackConfig, StackState]) -> None:
    config, state = stack
    s3 = client(state, "s3")
    s3.put_object(Bucket=config.source_bucket, Key="half_up/a.parquet", Body=parquet(ROWS, 0))
    wait_for(lambda: settled(config, f"s3://{config.source_bucket}/half_up/", 1), "a file published", timeout=300)
    before = main_hash(state)
    down = {name: pid_of(config, name) for name in ("keeper", "nessie", "queue")}  # the keeper first: no healer left
    for pid in down.values():
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not any(process_alive(name, pid) for name, pid in down.items()), "the parts gone")
    assert "BROKEN" in wap(config, "status").stdout

    up = wap(config, "up")

    assert up.returncode == 0, up.stderr
    assert up.stdout.count("started again:") == 3, up.stdout
    assert "the lake kept" in up.stdout
    assert all(pid_of(config, name) != pid for name, pid in down.items())
    assert main_hash(state) == before and rows_on_main(state, "half_up") == ROWS  # the lake, intact
    assert json.loads(wap(config, "status", "--json").stdout)["healthy"]
    s3.put_object(Bucket=config.source_bucket, Key="half_up/b.parquet", Body=parquet(ROWS, ROWS))
    wait_for(lambda: settled(config, f"s3://{config.source_bucket}/half_up/", 2), "the next file published",
             timeout=300)
    assert rows_on_main(state, "half_up") == 2 * ROWS
    assert stack_environment(state)["AWS_ENDPOINT_URL"] == state.moto_url
