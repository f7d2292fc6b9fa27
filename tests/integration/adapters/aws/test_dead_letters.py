"""The dead-letter queue on the stack's moto over HTTP: `wap dlq list` / `wap dlq redrive` show and replay what is
there (each message once)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from wap_ingest.adapters.aws.dead_letters import SqsDeadLetters
from wap_ingest.adapters.slack.incoming import SignedRequest
from wap_stack.slack_workspace import SIGNING_SECRET, Workspace

pytestmark = pytest.mark.stack


def test_wap_dlq_lists_and_redrives_each_message_once(stack_env: dict[str, str]) -> None:
    import boto3

    sqs: Any = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    queue = sqs.create_queue(QueueName="redrive-target")["QueueUrl"]
    dead = sqs.create_queue(QueueName="redrive-dlq")["QueueUrl"]
    body = json.dumps({"Records": [{"eventSource": "aws:s3", "s3": {"bucket": {"name": "source"},
                                                                     "object": {"key": "t/a.parquet"}}}]})
    sqs.send_message(QueueUrl=dead, MessageBody=body)
    sqs.send_message(QueueUrl=dead, MessageBody="not an event")
    letters = SqsDeadLetters(sqs, dead, queue, peek_seconds=1)
    listed = letters.peek()
    assert sorted(m.objects for m in listed) == [(), ("s3://source/t/a.parquet",)]
    time.sleep(1.5)  # listing hid them for a moment; nothing else changed
    moved = letters.redrive()
    assert len(moved) == 2
    back = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert sorted(m["Body"] for m in back) == sorted([body, "not an event"])
    assert sqs.receive_message(QueueUrl=dead, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []) == []


def test_the_cli_lists_the_dead_letters(stack_env: dict[str, str], capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    from wap_ingest.entrypoints import cli

    sqs: Any = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    queue = sqs.create_queue(QueueName="cli-target")["QueueUrl"]
    dead = sqs.create_queue(QueueName="cli-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=dead, MessageBody="poison")
    assert cli.main(["dlq", "list", "--json", "--queue-url", queue, "--dlq-url", dead]) == 0
    listed = json.loads(capsys.readouterr().out)["messages"]
    assert [m["body"] for m in listed] == [{"kind": "unknown", "bytes": 6, "sha256": "5743abddddfa08c1",
                                            "content": "(not shown)"}]  # no body nobody foresaw is shown
    monkeypatch.delenv("WAP_STACK_DLQ_URL", raising=False)
    monkeypatch.delenv("WAP_DEAD_LETTER_QUEUE_URL", raising=False)
    assert cli.main(["dlq", "list", "--queue-url", queue]) == 2  # no dead-letter queue named: the fix is printed
    assert "WAP_DEAD_LETTER_QUEUE_URL is not set" in capsys.readouterr().err


def test_the_cli_lists_a_forwarded_click_without_its_signature_token_or_response_url(
        stack_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A click the endpoint handed to the function, dead-lettered: `wap dlq list` (JSON and text) shows who asked
    what, and none of what Slack signed it with or lets it answer through."""
    import boto3

    from wap_ingest.entrypoints import cli

    workspace = Workspace(tmp_path / "alerts.jsonl", base_url="http://127.0.0.1:1")
    posted = workspace.post("#wap-alerts", "alarm", [{"type": "actions", "block_id": "wap.actions", "elements": [
        {"type": "button", "action_id": "wap.redrive", "value": "wap-events-dlq",
         "text": {"type": "plain_text", "text": "Redrive"}}]}])
    payload = workspace.click("U0ALICE01", "#wap-alerts", posted["ts"], "wap.redrive")
    body = urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()))
    forwarded = SignedRequest(stamp, str(SignatureVerifier(SIGNING_SECRET).generate_signature(
        timestamp=stamp, body=body)), body).to_message()
    sqs: Any = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    queue = sqs.create_queue(QueueName="cli-slack-target")["QueueUrl"]
    dead, again = (sqs.create_queue(QueueName=f"cli-slack-dlq-{n}")["QueueUrl"] for n in ("json", "text"))
    for each in (dead, again):  # a listing hides what it listed for 30 s: one queue per listing
        sqs.send_message(QueueUrl=each, MessageBody=forwarded)
    assert cli.main(["dlq", "list", "--json", "--queue-url", queue, "--dlq-url", dead]) == 0
    listed = capsys.readouterr().out
    [shown] = json.loads(listed)["messages"]
    assert shown["body"]["interaction"] == {"type": "block_actions", "user": "U0ALICE01", "name": "alice",
                                            "action": "redrive", "target": "wap-events-dlq",
                                            "channel": posted["channel_id"], "message_ts": posted["ts"]}
    assert cli.main(["dlq", "list", "--queue-url", queue, "--dlq-url", again]) == 0
    listed += capsys.readouterr().out
    assert "Slack action redrive on wap-events-dlq by U0ALICE01" in listed
    signature = json.loads(forwarded)["signature"]
    for secret in (signature, signature[3:], str(payload["response_url"]), str(payload["trigger_id"]), "deprecated",
                   body[:40]):
        assert secret not in listed, secret
