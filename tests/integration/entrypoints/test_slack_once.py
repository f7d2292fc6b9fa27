"""Every click once, and nothing internal shown, through the real stack: the stack's Slack channel posts each click to
the interactivity endpoint over HTTP (signed as Slack signs), which hands it to the ingest queue (moto's SQS over
HTTP), where the stack's function (its worker, under the Lambda runtime emulator) runs it and answers through the real
slack-sdk client. The alarm's Show and Redrive need no engine, so these tests start none.

| what                                                             | what happens                                  |
|------------------------------------------------------------------|-----------------------------------------------|
| a Redrive clicked, then a copy of its message sent to the queue  | the copy redrives nothing; the person is told |
| (as the operator role may), and SQS delivering its message again | the same: nothing redriven, the answer says so|
| a header with a non-ASCII digit, sent as Latin-1 or UTF-8 bytes  | 401 and a one-line reason, never a 500        |
| a Show that fails inside the function (the queue is gone)        | a reference in Slack, the error in the log    |
| a click by someone off the allow list                            | only that they may not act                    |
| the alarm's Show over a dead-lettered click                      | who did what; no signature, token or URL      |
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import boto3
import pytest
import requests

from tests.conftest import Lake
from tests.slack_channel import ALICE, MALLORY, Channel, edited, form_body, signed_headers
from tests.waiting import wait_for
from wap_ingest.adapters.slack.incoming import SignedRequest
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.dead_letters import QueueAlarm, alert_for_alarm
from wap_ingest.entrypoints import lambda_handler
from wap_stack.state import StackState
from wap_stack.worker import sqs_event_for

pytestmark = [pytest.mark.stack]


class Context:
    function_name = "wap-ingest"
    memory_limit_in_mb = 3008
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:wap-ingest"
    aws_request_id = "req-redelivered"

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


@pytest.fixture
def channel(local_stack: StackState) -> Channel:
    return Channel.of(local_stack)


@pytest.fixture
def sqs(lake: Lake) -> Any:
    return boto3.session.Session().client("sqs", endpoint_url=lake.env["AWS_ENDPOINT_URL"], region_name="us-east-1")


def notification(key: str) -> str:
    """A dead-lettered S3 notification (for a bucket the service does not read: refused at once when redriven)."""
    return json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": "not-a-source-bucket"}, "object": {"key": key, "size": 1}}}]})


def alarmed(lake: Lake, channel: Channel, queue: str) -> str:
    """The dead-letter alarm's alert for `queue`, posted to the channel: its message's ts."""
    alert = alert_for_alarm(QueueAlarm(f"alarm-{queue}", "ALARM", "1 message", queue, "2026-11-27T00:00:00Z"))
    assert alert is not None and lake.service.notifier.notify(alert)
    return str(wait_for(lambda: channel.message_about(f"alarm-{queue}"), "the alarm's alert")["ts"])


def depth(sqs: Any, url: str) -> int:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    return int(found["ApproximateNumberOfMessages"])


def forwarded(channel: Channel, ts: str, action: str) -> SignedRequest:
    """The request the endpoint handed to the function for a click, as the channel posted it."""
    [sent] = [s for s in channel.sent() if ts in s["body"] and action in s["body"]]
    return SignedRequest(sent["headers"]["X-Slack-Request-Timestamp"], sent["headers"]["X-Slack-Signature"],
                         sent["body"])


def test_a_redrive_runs_once_whoever_sends_its_message_again(lake: Lake, channel: Channel, sqs: Any,
                                                             local_stack: StackState,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"once-dlq-{uuid.uuid4().hex[:8]}"
    dlq = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=dlq, MessageBody=notification("t/first.parquet"))
    ts = alarmed(lake, channel, name)
    assert channel.click(ALICE, ts, "wap.redrive")["status"] == 200
    message = wait_for(lambda: edited(channel, f"alarm-{name}"), "the alarm's alert updated")
    assert "Redriven by <@U0ALICE01>: 1 message(s) sent back to the ingest queue." in message["text"]
    assert depth(sqs, dlq) == 0
    request = forwarded(channel, ts, "wap.redrive")
    sqs.send_message(QueueUrl=dlq, MessageBody=notification("t/second.parquet"))  # dead-lettered since

    # a copy of the click's message sent to the ingest queue (the operator role may send there): the function runs it
    sqs.send_message(QueueUrl=local_stack.queue_url, MessageBody=request.to_message())
    told = "Nothing done: this action was received before and is never run twice."
    wait_for(lambda: depth(sqs, dlq) == 0 or [e for e in channel.ephemerals(ALICE) if e.startswith(told)],
             "the copy handled")
    assert depth(sqs, dlq) == 1, "the copy redrove the message dead-lettered since"
    print(f"alice is told: {[e for e in channel.ephemerals(ALICE) if e.startswith(told)][-1]}")

    # SQS delivering the click's own message again (as after an invocation that died once its work was done): the
    # function's handler, with the stack's service, gets the very message
    record = json.loads(lake.s3.get_object(Bucket=lake.env["LAKE_BUCKET"],
                                           Key=f"wap-requests/{request.action_id}.claim.json")["Body"].read())
    assert record["progress"] == "done", record
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(lake.service))
    arn = sqs.get_queue_attributes(QueueUrl=local_stack.queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    again = lambda_handler.handler(sqs_event_for([{
        "MessageId": record["message_id"], "ReceiptHandle": "redelivered", "Body": request.to_message(),
        "Attributes": {"ApproximateReceiveCount": "2"}}], arn, "us-east-1"), Context())
    print(f"the redelivery answered: {again['requests']}")
    assert again["batchItemFailures"] == [] and again["requests"][0]["seen"] == "done"
    assert depth(sqs, dlq) == 1
    message = channel.message_about(f"alarm-{name}")
    assert message is not None and message["text"].count("Redriven by") == 1


@pytest.mark.parametrize("stamp", [b"\xb2", "²".encode(), "1800000000²".encode(), "\uff11\uff18".encode(),
                                   "\u0663\u0664".encode()], ids=["latin-1 ²", "utf-8 ²", "utf-8 1..²", "fullwidth",
                                                                   "arabic-indic"])
def test_a_timestamp_with_a_non_ascii_digit_over_http_is_refused_in_one_line(channel: Channel, stamp: bytes) -> None:
    body = form_body({"type": "block_actions", "user": {"id": ALICE}, "actions": []})
    headers: dict[str, Any] = {**signed_headers(body), "X-Slack-Request-Timestamp": stamp}
    answer = requests.post(channel.endpoint, data=body.encode(), headers=headers, timeout=60)
    print(f"{stamp!r}: {answer.status_code} {answer.text}")
    assert answer.status_code == 401 and "\n" not in answer.text
    assert answer.text.startswith("refused: malformed: X-Slack-Request-Timestamp is not a time")


def test_a_signature_with_non_ascii_letters_over_http_is_refused_in_one_line(channel: Channel) -> None:
    body = form_body({"type": "block_actions", "user": {"id": ALICE}, "actions": []})
    headers: dict[str, Any] = {**signed_headers(body), "X-Slack-Signature": ("v0=" + "é" * 64).encode()}
    answer = requests.post(channel.endpoint, data=body.encode(), headers=headers, timeout=60)
    assert answer.status_code == 401 and answer.text.startswith("refused: malformed: X-Slack-Signature")


def test_a_failure_in_the_function_shows_a_reference_and_the_log_has_the_error(lake: Lake, channel: Channel,
                                                                               local_stack: StackState) -> None:
    gone = f"once-gone-{uuid.uuid4().hex[:8]}"  # the alarm names a queue that does not exist (any more)
    ts = alarmed(lake, channel, gone)
    before = set(channel.ephemerals(ALICE))
    assert channel.click(ALICE, ts, "wap.show_dead_letters")["status"] == 200
    message = wait_for(lambda: edited(channel, f"alarm-{gone}"), "the alarm's alert updated")
    line = message["text"].rsplit("\n", 1)[-1]
    told = wait_for(lambda: [e for e in channel.ephemerals(ALICE) if e not in before], "alice told")[-1]
    print(f"the alert ends: {line}\nalice is told: {told}")
    for shown in (line, told):
        assert "reference" in shown and gone not in shown and "SQS" not in shown and "Fix" not in shown, shown
    ref = told.rsplit("reference ", 1)[1].rstrip(").")
    logs = "".join(p.read_text(errors="replace") for p in Path(local_stack.state_dir, "logs").glob("*.log"))
    [logged] = [ln for ln in logs.splitlines() if ref in ln and "Slack action failed" in ln]
    assert gone in logged  # the error itself, for whoever reads the log


def test_someone_off_the_allow_list_is_told_only_that(lake: Lake, channel: Channel) -> None:
    ts = alarmed(lake, channel, f"once-q-{uuid.uuid4().hex[:8]}")
    assert channel.click(MALLORY, ts, "wap.show_dead_letters")["status"] == 200
    refusal = wait_for(lambda: [e for e in channel.ephemerals(MALLORY) if "may not act" in e], "mallory told")[-1]
    assert refusal == "Nothing done: <@U0MALLORY> may not act on WAP alerts."


def test_the_alarms_show_lists_a_dead_lettered_click_without_its_secrets(lake: Lake, channel: Channel,
                                                                         sqs: Any) -> None:
    name = f"once-show-{uuid.uuid4().hex[:8]}"
    dlq = sqs.create_queue(QueueName=name)["QueueUrl"]
    ts = alarmed(lake, channel, name)
    assert channel.click(ALICE, ts, "wap.show_dead_letters")["status"] == 200
    wait_for(lambda: [e for e in channel.ephemerals(ALICE) if f"{name} is empty" in e], "the empty list")
    clicked = forwarded(channel, ts, "wap.show_dead_letters")  # that click, dead-lettered (as if it failed)
    sqs.send_message(QueueUrl=dlq, MessageBody=clicked.to_message())
    second = alarmed(lake, channel, name)
    assert channel.click(ALICE, second, "wap.show_dead_letters")["status"] == 200
    shown = wait_for(lambda: [e for e in channel.ephemerals(ALICE) if f"message(s) in {name}" in e], "the list")[-1]
    print(shown)
    payload = json.loads(parse_qs(clicked.body)["payload"][0])
    assert f"Slack action show_dead_letters on {name} by U0ALICE01" in shown
    for secret in (clicked.signature, payload["response_url"], payload["trigger_id"], clicked.body[:60]):
        assert secret not in shown, secret
