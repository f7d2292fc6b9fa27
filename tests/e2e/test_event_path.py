"""Dropping a file into the source bucket is all it takes: moto S3 notification -> SQS -> worker ->
the handler under the Lambda Runtime Interface Emulator -> Spark -> Nessie, and alerts -> Slack sink."""

from __future__ import annotations

import json
import time
from typing import Any, TypeVar

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.waiting import wait_for
from wap_stack.config import StackConfig
from wap_stack.runtime import RESTARTS, invoke
from wap_stack.slack_sink import read_messages
from wap_stack.state import StackState, read_in_flight, read_record

pytestmark = [pytest.mark.stack, pytest.mark.spark]
T = TypeVar("T")




def alerts_about(state: StackState, needle: str) -> list[dict[str, Any]]:
    return [m for m in read_messages(state.state_dir / "alerts.jsonl") if needle in m["text"]]


def table_rows(lake: Lake, table: str) -> int | None:
    try:
        return lake.count(table)
    except Exception:  # not created on main yet
        return None


def test_a_clean_file_appears_on_main(lake: Lake, local_stack: StackState, table_name: str) -> None:
    lake.drop(f"{table_name}/clean.parquet", parquet_bytes(120))
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}"), "rows on main") == 120
    assert not [b for b in lake.wap_branches() if table_name in b]
    assert alerts_about(local_stack, table_name) == []
    results = lake.results(f"wap.{table_name}")  # the load's audit results, merged with it
    assert {r["source"] for r in results} == {f"s3://{lake.source_bucket}/{table_name}/clean.parquet"}
    assert {(r["check"], r["verdict"]) for r in results} >= {("not_null", "passed"), ("metric", "measured")}
    assert [r["value"] for r in results if r["metric"] == "row_count"] == [120.0]


def test_a_file_with_nulls_leaves_its_branch_and_one_alert(lake: Lake, local_stack: StackState,
                                                           table_name: str) -> None:
    lake.drop(f"{table_name}/nulls.parquet", parquet_bytes(50, nulls=5))
    [alert] = wait_for(lambda: alerts_about(local_stack, table_name), "the alert")
    [branch] = [b for b in lake.wap_branches() if table_name in b]
    assert branch in alert["text"]
    assert "not_null(my_col_1): measured 5 nulls, expected 0 nulls" in alert["text"]
    assert table_rows(lake, f"wap.{table_name}") is None  # main never saw the table
    assert lake.count(f"wap.{table_name}", ref=branch) == 50
    assert lake.results(f"wap.{table_name}") == []  # nor its audit results: they stay with the branch
    assert [(r["measured"], r["verdict"]) for r in lake.results(f"wap.{table_name}", branch)
            if r["check"] == "not_null"] == [("5 nulls", "failed")]
    time.sleep(2)
    assert len(alerts_about(local_stack, table_name)) == 1


def test_an_event_sent_straight_to_the_function_waits_for_the_batch_it_is_running(
        lake: Lake, local_stack: StackState, stack_config: StackConfig, table_name: str) -> None:
    """SNS and EventBridge invoke the function directly while the worker's batches run. The emulator serves one
    invocation at a time and panics on a second (CI met it: the dead-letter alarm's invocation in test_iam_enforced
    broke with RemoteDisconnected); `invoke` waits for the environment's slot, which the worker holds for its
    batches. Events go straight to the function for as long as the file's batch runs: none breaks, the environment
    is not replaced, and the file is published."""
    state_dir, url, event = stack_config.state_dir, str(local_stack.invoke_url), {"hello": "world"}
    invoke(url, event, 300, (state_dir, "lambda"))  # warm: the batch, not the first start, is what the events meet
    before = read_record(stack_config) or {}
    lake.drop(f"{table_name}/while-invoked.parquet", parquet_bytes(500))
    answers, during = list[dict[str, Any]](), 0
    deadline = time.monotonic() + 240
    while not _worker_reported(local_stack, table_name) and time.monotonic() < deadline:
        during += any(b["state"] == "running" for b in read_in_flight(state_dir).get("lambda", []))
        answers.append(invoke(url, event, 300, (state_dir, "lambda")))
    assert during, "no event was sent while the file's batch ran"
    assert all("unrecognised event" in str(a.get("errorMessage")) for a in answers), answers
    after = read_record(stack_config) or {}
    assert after["lambda_pid"] == before["lambda_pid"]  # no crash, no fresh environment
    assert after.get(RESTARTS, {}).get("lambda") == before.get(RESTARTS, {}).get("lambda")
    assert table_rows(lake, f"wap.{table_name}") == 500


def _worker_reported(state: StackState, table: str) -> bool:
    lines = (state.state_dir / "logs" / "worker.log").read_text().splitlines()
    return any(table in o.get("object", "") for line in lines if line.startswith("{")
               for o in json.loads(line).get("objects") or [])


def test_keys_with_spaces_and_unicode(lake: Lake, table_name: str) -> None:
    lake.drop(f"{table_name}/März 2026/données brutes ü.parquet", parquet_bytes(7))
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}"), "rows on main") == 7


def test_one_sqs_batch_with_a_bad_file_publishes_the_others(lake: Lake, local_stack: StackState,
                                                            table_name: str) -> None:
    """Three notifications in one SQS batch (objects in a source bucket without notifications, so only these
    messages announce them): the worker hands them to the function in one invocation."""
    staging = lake.inbox_bucket
    other = f"{table_name}_b"
    keys = {f"{table_name}/1.parquet": parquet_bytes(3), f"{other}/2.parquet": parquet_bytes(4, nulls=1),
            f"{table_name}/3.parquet": parquet_bytes(5)}
    for key, body in keys.items():
        lake.s3.put_object(Bucket=staging, Key=key, Body=body)
    sqs = _sqs(lake)
    sqs.send_message_batch(QueueUrl=local_stack.queue_url, Entries=[
        {"Id": str(i), "MessageBody": json.dumps({"Records": [{
            "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": staging}, "object": {"key": key.replace(" ", "+")}}}]})}
        for i, key in enumerate(keys)
    ])

    def batch_line() -> dict[str, Any] | None:
        for line in (local_stack.state_dir / "logs" / "worker.log").read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry["event"] == "batch" and any(table_name in o["object"] for o in entry["objects"]):
                return entry
        return None

    batch = wait_for(batch_line, "the worker's batch")
    assert batch["messages"] == 3 and batch["succeeded"] == 3 and batch["failed"] == 0
    statuses = {o["object"].rsplit("/", 2)[-2] + "/" + o["object"].rsplit("/", 1)[-1]: o["status"]
                for o in batch["objects"]}
    assert statuses == {f"{table_name}/1.parquet": "published", f"{other}/2.parquet": "rejected",
                        f"{table_name}/3.parquet": "published"}
    assert lake.count(f"wap.{table_name}") == 8


def _sqs(lake: Lake) -> Any:
    import boto3

    return boto3.session.Session().client("sqs", endpoint_url=lake.env["AWS_ENDPOINT_URL"], region_name="us-east-1")


def test_a_poison_message_ends_in_the_dead_letter_queue_with_an_alert(lake: Lake, local_stack: StackState) -> None:
    sqs = _sqs(lake)
    marker = f"poison-{time.time_ns()}"
    sent = sqs.send_message(QueueUrl=local_stack.queue_url, MessageBody=f"not an event {marker}")["MessageId"]

    def dead_lettered() -> list[dict[str, Any]] | None:
        got = sqs.receive_message(QueueUrl=local_stack.dead_letter_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  VisibilityTimeout=0).get("Messages", [])
        return [m for m in got if m["MessageId"] == sent] or None

    wait_for(dead_lettered, "the message in the dead-letter queue", timeout=120)
    final = wait_for(lambda: [a for a in alerts_about(local_stack, sent) if "dead-letter queue" in a["text"]],
                     "the final alert")
    assert "cannot read" in final[0]["text"]


def test_warm_invocations_reuse_one_service_and_spark_session(lake: Lake, local_stack: StackState,
                                                              table_name: str) -> None:
    for i in range(2):
        lake.drop(f"{table_name}/{i}.parquet", parquet_bytes(3))
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}") == 6 or None, "both files on main")
    # the function's output holds its log records and its metrics (embedded metric format: `_aws`, no message),
    # as CloudWatch Logs does; only the records are counted
    lines = [e for line in (local_stack.state_dir / "logs" / "lambda.log").read_text().splitlines()
             if line.startswith("{") and "message" in (e := json.loads(line))]
    assert sum("Spark session started" in e["message"] for e in lines) == 1
    assert sum("service built" in e["message"] for e in lines) == 1
    outcomes = [e for e in lines if e["message"] == "outcome" and table_name in e.get("object_key", "")]
    assert len(outcomes) == 2 and all(e["cold_start"] is False for e in outcomes)
    published = [e for e in lines if e["message"].startswith("published") and table_name in e.get("object_key", "")]
    assert all(e["table"] == f"wap.{table_name}" and e["branch"].startswith(f"wap-{table_name}-") for e in published)
