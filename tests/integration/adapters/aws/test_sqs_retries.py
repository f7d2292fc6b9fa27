"""SqsRetries against moto's SQS over HTTP: the message stays invisible for the back-off, then comes back."""

from __future__ import annotations

import time
import uuid
from typing import Any

import boto3
import pytest

from wap_ingest.adapters.aws.sqs import SqsRetries

pytestmark = [pytest.mark.stack]


def test_a_delayed_message_comes_back_after_its_back_off_and_not_before(stack_env: dict[str, str]) -> None:
    sqs: Any = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"retries-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "600"})[
        "QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert SqsRetries(sqs).back_off(arn, message["ReceiptHandle"], 2)
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []  # still hidden
    time.sleep(2.5)
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, AttributeNames=["ApproximateReceiveCount"])
    [back] = again["Messages"]  # well before the queue's 600 s
    assert back["MessageId"] == message["MessageId"] and back["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_failure_to_delay_is_reported_not_raised(stack_env: dict[str, str]) -> None:
    sqs: Any = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    assert SqsRetries(sqs).back_off("arn:aws:sqs:us-east-1:123456789012:no-such-queue", "handle", 5) is False
