"""The dead-letter queue on the stack's moto over HTTP: `wap dlq list` / `wap dlq redrive` show and replay what is
there (each message once)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from wap_ingest.adapters.dead_letters import SqsDeadLetters

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
    assert [m["body"] for m in listed] == ["poison"]
    monkeypatch.delenv("WAP_STACK_DLQ_URL", raising=False)
    monkeypatch.delenv("WAP_DEAD_LETTER_QUEUE_URL", raising=False)
    assert cli.main(["dlq", "list", "--queue-url", queue]) == 2  # no dead-letter queue named: the fix is printed
    assert "WAP_DEAD_LETTER_QUEUE_URL is not set" in capsys.readouterr().err
