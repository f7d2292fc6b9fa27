"""The dead-letter queue, end to end on moto over HTTP: setup_aws.py creates its alarm (notifying the topic the
function is subscribed to), the alarm's SNS message becomes a Slack alert with the commands, and `wap dlq list` /
`wap dlq redrive` show and replay what is there."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.integration.test_setup_aws import client, moto_url, names_for, run  # noqa: F401 (moto_url: a fixture)
from tests.unit.test_lambda_handler import World
from wap_ingest.adapters.dead_letters import SqsDeadLetters
from wap_ingest.core.alerts import AlertKind
from wap_ingest.entrypoints import lambda_handler

pytestmark = pytest.mark.stack


def test_setup_aws_creates_the_alarm_on_the_dead_letter_queue_and_its_topic(moto_url: str) -> None:  # noqa: F811
    names = names_for("alarm")
    created = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert created.code == 0, created.out
    [alarm] = client(moto_url, "cloudwatch").describe_alarms(AlarmNames=[names.dead_letter_alarm])["MetricAlarms"]
    topic = f"arn:aws:sns:us-east-1:123456789012:{names.alarm_topic}"
    assert alarm["Namespace"] == "AWS/SQS" and alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": names.dead_letter_queue}]
    assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic] and alarm["Threshold"] == 1.0
    topics = [t["TopicArn"] for t in client(moto_url, "sns").list_topics()["Topics"]]
    assert topic in topics
    again = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"unchanged     cloudwatch alarm {names.dead_letter_alarm}" in again.out, again.out
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie", "--force").code == 0
    assert client(moto_url, "cloudwatch").describe_alarms(AlarmNames=[names.dead_letter_alarm])["MetricAlarms"] == []


def sns_alarm(state: str, queue: str = "wap-ingest-dlq") -> dict[str, Any]:
    message = {"AlarmName": "wap-ingest-dead-letters", "NewStateValue": state,
               "StateChangeTime": "2026-11-22T12:00:00Z",
               "NewStateReason": "Threshold Crossed: 1 datapoint [3.0 (22/11/26 11:59:00)] was >= the threshold (1.0).",
               "Trigger": {"MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS",
                           "Dimensions": [{"name": "QueueName", "value": queue}]}}
    return {"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0", "Sns": {
        "Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:123456789012:wap-alarms",
        "Subject": f'{state}: "wap-ingest-dead-letters"', "Message": json.dumps(message)}}]}


def test_the_alarm_reaches_slack_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    monkeypatch.setattr(lambda_handler, "service", lambda: world.service)
    assert world.invoke(sns_alarm("ALARM")) == {"alarms": ["wap-ingest-dead-letters"]}
    [alert] = world.notifier.alerts
    assert alert.kind is AlertKind.INFRASTRUCTURE and "wap-ingest-dlq" in alert.title
    assert ("See them", "wap dlq list") in alert.commands and ("Replay them (after the fix)", "wap dlq redrive") in \
        alert.commands
    assert "3.0" in alert.text
    world.invoke(sns_alarm("OK"))
    assert world.notifier.alerts[-1].kind is AlertKind.MAINTENANCE and "empty again" in world.notifier.alerts[-1].title


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
