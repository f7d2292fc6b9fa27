"""The local stand-in for Lambda's SQS event source mapping.

Polls the queue that S3 notifies, hands each batch to the function exactly as Lambda would (an SQS
event, through the Runtime Interface Emulator's invoke API, so the handler runs under awslambdaric with
real warm starts), deletes the messages that succeeded and leaves the `batchItemFailures` for
redelivery. After the queue's maxReceiveCount, SQS moves a message to the dead-letter queue.

One difference from AWS, for fast local feedback: a failed message becomes visible again after
`--retry-seconds` instead of the whole visibility timeout.

    python -m wap_ingest.local.worker --queue-url URL --invoke-url URL [--batch-size 100] [--batching-window 0.25]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

import boto3
import requests


class _Control:
    running = True
    busy = False  # a received batch is being handled: a stop request lets it finish


class _Stopped(BaseException):
    """Raised by the stop signal while the worker only waits on SQS: nothing is in flight, so it stops at once
    (instead of retrying its receive for seconds against a moto that is stopping with it)."""


def _stop(_signum: int, _frame: Any) -> None:
    _Control.running = False
    if not _Control.busy:
        raise _Stopped


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"ts": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, **fields}), flush=True)


def sqs_event_for(messages: list[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The event Lambda's event source mapping builds from received SQS messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def failed_ids(response: Mapping[str, Any], messages: list[Mapping[str, Any]]) -> set[str]:
    """Which messages failed: the partial batch response, or all of them when the function errored."""
    if "errorType" in response or "errorMessage" in response or "batchItemFailures" not in response:
        return {m["MessageId"] for m in messages}
    return {str(item["itemIdentifier"]) for item in response["batchItemFailures"]}


def _handle(sqs: Any, queue_url: str, invoke_url: str, received: list[Mapping[str, Any]], queue_arn: str, region: str,
            retry_seconds: int, invoke_timeout: float) -> None:
    """Invoke the function with one batch; delete what succeeded, make what failed visible again soon."""
    started = time.monotonic()
    try:
        reply = requests.post(invoke_url, json=sqs_event_for(received, queue_arn, region), timeout=invoke_timeout)
        payload: Any = reply.json() if reply.content else {}
        response: dict[str, Any] = (
            payload if isinstance(payload, dict) else {"errorMessage": f"unexpected response {reply.text[:200]}"}
        )
    except (requests.RequestException, ValueError) as exc:
        response = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
    failed = failed_ids(response, received)
    done = [m for m in received if m["MessageId"] not in failed]
    if done:
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
        )
    for message in received:
        if message["MessageId"] in failed:
            sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=retry_seconds
            )
    log("batch", messages=len(received), succeeded=len(done), failed=len(failed),
        seconds=round(time.monotonic() - started, 3), error=response.get("errorMessage"),
        objects=[{k: o.get(k) for k in ("object", "status", "table", "branch", "rows")}
                 for o in response.get("objects", [])])


def run(queue_url: str, invoke_url: str, batch_size: int, wait: int, visibility: int, retry_seconds: int,
        invoke_timeout: float, window: float = 0.25) -> None:
    sqs = boto3.client("sqs")
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    region = sqs.meta.region_name
    log("started", queue_url=queue_url, invoke_url=invoke_url)
    while _Control.running:
        try:
            received = _gather(sqs, queue_url, batch_size, wait, visibility, window)
        except Exception as exc:  # the queue is gone or moto is down: say so and keep trying
            log("receive_failed", error=str(exc))
            time.sleep(1)
            continue
        if received:
            _Control.busy = True
            try:
                _handle(sqs, queue_url, invoke_url, received, queue_arn, region, retry_seconds, invoke_timeout)
            finally:
                _Control.busy = False


def _gather(sqs: Any, queue_url: str, batch_size: int, wait: int, visibility: int,
            window: float) -> list[Mapping[str, Any]]:
    """Like the event source mapping with a batching window: receive (10 at most per call) until the batch is
    full or the window since the first message has passed."""
    received: list[Mapping[str, Any]] = []
    first: float | None = None
    while len(received) < batch_size:
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=min(10, batch_size - len(received)),
            WaitTimeSeconds=wait if not received else 0, VisibilityTimeout=visibility, AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        received.extend(got)
        if received and first is None:
            first = time.monotonic()
        if not got and (first is None or time.monotonic() - first >= window):
            break
        if first is not None and time.monotonic() - first >= window:
            break
        if not got:
            time.sleep(0.05)
    return received


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Poll SQS and invoke the function like Lambda's event source mapping")
    parser.add_argument("--queue-url", required=True)
    parser.add_argument("--invoke-url", required=True)
    parser.add_argument("--batch-size", type=int, default=100, help="as serverless.yml's batchSize")
    parser.add_argument("--batching-window", type=float, default=0.25,
                        help="seconds to fill a batch after its first message (serverless.yml: maximumBatchingWindow)")
    parser.add_argument("--wait", type=int, default=1, help="long-poll seconds")
    parser.add_argument("--visibility", type=int, default=900, help="visibility timeout while a batch runs")
    parser.add_argument("--retry-seconds", type=int, default=2, help="delay before a failed message is retried")
    parser.add_argument("--invoke-timeout", type=float, default=960.0)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with contextlib.suppress(_Stopped):  # stopped while waiting on SQS
        run(args.queue_url, args.invoke_url, args.batch_size, args.wait, args.visibility, args.retry_seconds,
            args.invoke_timeout, args.batching_window)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
