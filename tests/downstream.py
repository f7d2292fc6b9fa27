"""Reading the local stack's downstream events back, as a consumer would: the stack's bus delivers every wap-lake
event to the queue WAP_STACK_DOWNSTREAM_QUEUE_URL. Every test shares that queue, so each event read is kept here
(per queue) and tests pick theirs by object."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import boto3

_SEEN: dict[str, list[dict[str, Any]]] = {}


def events_about(env: dict[str, str], wanted: Callable[[dict[str, Any]], bool], count: int,
                 timeout: float = 240.0) -> list[dict[str, Any]]:
    """The events (EventBridge envelopes: `detail-type`, `source`, `detail`) for which `wanted` holds, once there
    are `count` of them or `timeout` seconds passed."""
    url = env["WAP_STACK_DOWNSTREAM_QUEUE_URL"]
    sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    seen = _SEEN.setdefault(url, [])
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in seen if wanted(e)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            seen.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def about_object(suffix: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: any(str(uri).endswith(suffix) for uri in e.get("detail", {}).get("objects", []))
