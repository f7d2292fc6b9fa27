"""The local stand-in for Lambda's SQS event source mapping.

Polls the queue that S3 notifies, hands each batch to the function exactly as Lambda would (an SQS
event, through the Runtime Interface Emulator's invoke API, so the handler runs under awslambdaric with
real warm starts), deletes the messages that succeeded and leaves the `batchItemFailures` for
redelivery, as AWS does: the function delays each failed message's next attempt itself (WAP_RETRY_*), so
retries behave the same here and in AWS. After the queue's maxReceiveCount, SQS moves a message to the
dead-letter queue.

With `--environment`, the worker supervises its execution environment as Lambda does (wap_stack/runtime.py): when
the runtime or the emulator dies, the environment is replaced by a fresh one (a cold start) and the crashed
batch's messages come back after their visibility timeout (`--visibility`, the stack's WAP_STACK_VISIBILITY_SECONDS).
It notes the batch it handles, and a crashed batch until its messages come back, in <state dir>/in-flight/ for
`wap stack status`. A worker that is being stopped restarts nothing.

    python -m wap_stack.worker --queue-url URL --invoke-url URL [--batch-size 100] [--batching-window 0.25]
        [--environment lambda --state-dir DIR --invoke-port P --runtime-port P]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3
import requests

from wap_stack.config import StackConfig
from wap_stack.runtime import Supervisor, invoke
from wap_stack.state import write_in_flight

SQS_BATCH_LIMIT = 10  # entries of one DeleteMessageBatch (AWS's limit; ElasticMQ holds it, moto did not)


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
            invoke_timeout: float, supervisor: Supervisor | None = None) -> str | None:
    """Invoke the function with one batch and delete what succeeded, as the event source mapping does. What failed is
    left alone: the function set each failed message's retry back-off itself; a crashed invocation's messages come
    back after their visibility timeout. A crashed execution environment is replaced by a fresh one."""
    started = time.monotonic()
    try:
        slot = (supervisor.config.state_dir, supervisor.name) if supervisor is not None else None
        response = invoke(invoke_url, sqs_event_for(received, queue_arn, region), invoke_timeout, slot)
    except (requests.RequestException, ValueError) as exc:
        response = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
    failed = failed_ids(response, received)
    done = [m for m in received if m["MessageId"] not in failed]
    for first in range(0, len(done), SQS_BATCH_LIMIT):  # SQS takes at most 10 entries a call (moto took more)
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                     for i, m in enumerate(done[first:first + SQS_BATCH_LIMIT])],
        )
    crash = supervisor.crash_in(response) if supervisor is not None and failed else None
    log("batch", messages=len(received), succeeded=len(done), failed=len(failed),
        seconds=round(time.monotonic() - started, 3), error=response.get("errorMessage"), crash=crash,
        objects=[{k: o.get(k) for k in ("object", "status", "table", "branch", "rows")}
                 for o in response.get("objects", [])])
    if crash is not None and supervisor is not None:
        _restart(supervisor, crash)
    return crash


def _restart(supervisor: Supervisor, crash: str) -> None:
    restarted = supervisor.restart(crash)
    if restarted:
        log("environment_restarted", environment=supervisor.name, crash=crash, pid=supervisor.pid)
    elif supervisor.stopping():
        log("environment_not_restarted", environment=supervisor.name, crash=crash, reason="the stack is stopping")
    else:
        log("environment_failed", environment=supervisor.name, crash=crash, pid=supervisor.pid)


def _note(supervisor: Supervisor | None, batches: list[dict[str, Any]]) -> None:
    if supervisor is not None:
        with contextlib.suppress(OSError):
            write_in_flight(supervisor.config.state_dir, supervisor.name, batches)


def run(queue_url: str, invoke_url: str, batch_size: int, wait: int, visibility: int, invoke_timeout: float,
        window: float = 0.25, supervisor: Supervisor | None = None) -> None:
    sqs = boto3.client("sqs")
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    region = sqs.meta.region_name
    log("started", queue_url=queue_url, invoke_url=invoke_url, visibility=visibility)
    crashed: list[dict[str, Any]] = []  # batches whose messages wait for their visibility timeout
    while _Control.running:
        try:
            received = _gather(sqs, queue_url, batch_size, wait, visibility, window)
        except Exception as exc:  # the queue is gone or moto is down: say so and keep trying
            log("receive_failed", error=str(exc))
            time.sleep(1)
            continue
        now = time.time()
        crashed = [batch for batch in crashed if batch["back_at"] > now]
        if received:
            _Control.busy = True
            batch = {"messages": len(received), "received_at": now, "back_at": now + visibility, "state": "running"}
            _note(supervisor, [*crashed, batch])
            try:
                if supervisor is not None and not supervisor.alive():  # died between invocations: a fresh one first
                    _restart(supervisor, supervisor.gone())
                crash = _handle(sqs, queue_url, invoke_url, received, queue_arn, region, invoke_timeout, supervisor)
                if crash is not None:
                    crashed.append(batch | {"state": "crashed", "crash": crash})
            finally:
                _Control.busy = False
            _note(supervisor, crashed)


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
    parser.add_argument("--visibility", type=int, default=1200,
                        help="visibility timeout while a batch runs (the stack's WAP_STACK_VISIBILITY_SECONDS)")
    parser.add_argument("--invoke-timeout", type=float, default=960.0)
    parser.add_argument("--environment", help="the execution environment this worker supervises (lambda, lambda-2...)")
    parser.add_argument("--state-dir", type=Path, help="the stack's state folder (with --environment)")
    parser.add_argument("--invoke-port", type=int, help="the emulator's invoke port (with --environment)")
    parser.add_argument("--runtime-port", type=int, help="the emulator's runtime API port (with --environment)")
    parser.add_argument("--image", help="the Lambda image the environment runs (with --environment; "
                                        "wap_stack/image.py)")
    args = parser.parse_args(argv)
    supervisor = None
    if args.environment:
        from wap_stack.trigger import lambda_command

        config = StackConfig(state_dir=args.state_dir, image=args.image)
        supervisor = Supervisor(config, args.environment, args.invoke_port, args.runtime_port,
                                lambda_command(config, args.invoke_port, args.runtime_port), dict(os.environ),
                                worker_stopping=lambda: not _Control.running)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with contextlib.suppress(_Stopped):  # stopped while waiting on SQS
        run(args.queue_url, args.invoke_url, args.batch_size, args.wait, args.visibility, args.invoke_timeout,
            args.batching_window, supervisor)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
