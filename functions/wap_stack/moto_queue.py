"""moto's server with the stack's events queues served by ElasticMQ (wap_stack/queue.py), behind moto's own endpoint.

moto's SQS scans a queue's every message on each ReceiveMessage (moto/sqs/models.py `Queue.messages`), so a receive
costs more the deeper the queue (4 receives: 0.01 s empty, 0.86 s at 500 messages, 2.66 s at 1,500), and a burst of
files drains at a fraction of the rate the function processes them. ElasticMQ's receive does not grow with depth
(the same 4 receives: 0.11 s empty, 0.14 s at 500, 0.10 s at 1,500, measured here). Two things join them, both here:

- every SQS request about one of the routed queues (the events queue and its dead-letter queue: by QueueUrl or
  QueueName) is authenticated and authorized by moto as any request is (with `--iam`, against the caller's policies,
  wap_stack/moto_iam.py), then forwarded as it came (body, protocol headers) to ElasticMQ, whose answer is returned as
  it is. ElasticMQ names its queues with moto's address, account and region (its `node-address` and `aws` settings),
  so queue URLs and ARNs are the ones moto would give, and every client (the function, its worker, the Slack
  endpoint, `wap publish`, the tests) keeps talking to AWS_ENDPOINT_URL alone;
- moto delivers S3 notifications to a queue inside its own process (moto/s3/notifications.py `_send_sqs_message`, to
  its SQS backend; its SNS http(s) subscriptions would POST for real, but drop any failure unseen): for a routed queue
  the event is sent to ElasticMQ instead, retried for up to `DELIVERY_SECONDS` while ElasticMQ is down (restarted by
  the stack's keeper on its persistent store), and a delivery that still fails is logged, never silently dropped.

S3's ranged GETs are served at the range's cost (wap_stack/moto_ranges.py), not by reading the whole object, and two
per-request costs AWS has no counterpart of are gone (wap_stack/moto_overheads.py).

Everything else (other queues, e.g. the downstream events' queue EventBridge fills inside moto) stays moto's.

    python -m wap_stack.moto_queue --queue-endpoint http://127.0.0.1:PORT --queues a,b [--decisions FILE] \\
        -H 127.0.0.1 -p PORT
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import requests

from wap_stack import moto_overheads, moto_ranges
from wap_stack.moto_emr import accept_emr_spark_labels

DELIVERY_SECONDS = 120.0  # how long an S3 notification waits for a queue server that is being restarted
FORWARDED_HEADERS = ("Content-Type", "X-Amz-Target", "X-Amzn-Query-Mode")


def queue_name_of(response: Any) -> str | None:
    """The queue an SQS request is about (its QueueName, or the last segment of its QueueUrl), or None."""
    for name in ("QueueName", "QueueUrl"):
        try:
            value = response._get_param(name)
        except Exception:  # not in this request's body
            value = None
        if not value and name in response.querystring:
            value = response.querystring[name][0]
        if value:
            return str(value).rstrip("/").split("/")[-1]
    return None


class Forwarder:
    """Sends requests to the queue server with one pooled HTTP session (moto's threads share it)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False  # never through an HTTP(S)_PROXY

    def forward(self, response: Any) -> tuple[int, dict[str, str], str | bytes]:
        headers = {h: response.headers[h] for h in FORWARDED_HEADERS if response.headers.get(h)}
        body = response.body.encode() if isinstance(response.body, str) else response.body
        query = "&".join(f"{k}={v}" for k, values in response.querystring.items() for v in values) \
            if not body and response.method == "GET" else ""
        try:
            answer = self.session.request(response.method, f"{self.endpoint}/{('?' + query) if query else ''}",
                                          data=body, headers=headers, timeout=60)
        except requests.RequestException as exc:  # the queue server is down (its keeper restarts it): retryable
            error = {"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": f"queue server down: {exc}"}
            return 503, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(error)
        kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "x-amzn-requestid")}
        return answer.status_code, kept, answer.content

    def deliver(self, queue_url: str, body: str, *, patience: float = DELIVERY_SECONDS,
                log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> bool:
        """SendMessage `body` to `queue_url`, retried while the queue server is down; False (logged) if it never
        took it."""
        deadline, wait, error = time.monotonic() + patience, 0.2, ""
        while True:
            try:
                answer = self.session.post(self.endpoint + "/", timeout=30, data=json.dumps(
                    {"QueueUrl": queue_url, "MessageBody": body}), headers={
                    "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
                if answer.status_code == 200:
                    return True
                error = f"HTTP {answer.status_code}: {answer.text[:200]}"
            except requests.RequestException as exc:
                error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() + wait > deadline:
                log(f"wap_stack.moto_queue: an S3 notification to {queue_url} was NOT delivered after {patience:g} s "
                    f"({error}): {body[:300]}")
                return False
            time.sleep(wait)
            wait = min(wait * 2, 5.0)


def install(endpoint: str, queues: set[str]) -> Forwarder:
    """Route the `queues` to the queue server at `endpoint` (see the module docstring)."""
    from moto.core.responses import BaseResponse
    from moto.s3 import notifications
    from moto.sqs.responses import SQSResponse
    from werkzeug.exceptions import HTTPException

    forwarder = Forwarder(endpoint)
    original_call = SQSResponse.call_action

    def call_action(self: Any) -> Any:
        if queue_name_of(self) not in queues:
            return original_call(self)
        resource = self._determine_resource() if hasattr(self, "_determine_resource") else "*"
        try:  # moto authenticates and authorizes the request as ever (IAM with --iam)
            self._authenticate_and_authorize_normal_action(resource)
        except HTTPException as http_error:
            status, headers, body = BaseResponse._transform_response(
                self.response_headers, (http_error.description, {"status": http_error.code}))
            headers, body = self._enrich_response(headers, body)
            return status, headers, body
        return forwarder.forward(self)

    original_send = notifications._send_sqs_message

    def send_sqs_message(account_id: str, event_body: Any, queue_name: str, region_name: str) -> None:
        if queue_name not in queues:
            original_send(account_id, event_body, queue_name, region_name)
            return
        url = f"{forwarder.endpoint}/{account_id}/{queue_name}"
        forwarder.deliver(url, json.dumps(event_body))

    SQSResponse.call_action = call_action  # type: ignore[method-assign]
    notifications._send_sqs_message = send_sqs_message
    return forwarder


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--queue-endpoint" not in args or "--queues" not in args:
        print("usage: python -m wap_stack.moto_queue --queue-endpoint URL --queues a,b [--decisions FILE] "
              "[moto_server options]", file=sys.stderr)
        return 2
    found: dict[str, str] = {}
    for option in ("--queue-endpoint", "--queues"):
        at = args.index(option)
        found[option] = args[at + 1]
        del args[at: at + 2]
    install(found["--queue-endpoint"], {q for q in found["--queues"].split(",") if q})
    accept_emr_spark_labels()  # the application's emr-spark-8.1.0 (wap_stack/moto_emr.py)
    moto_ranges.install()  # a ranged GET at the range's cost, as S3 serves it (wap_stack/moto_ranges.py)
    moto_overheads.install()  # no directory listing per request, no parser built per event (moto_overheads.py)
    if "--decisions" in args:  # `up --iam`: moto_iam's enforcement on top
        from wap_stack import moto_iam

        return moto_iam.main(args)
    from moto.server import main as moto_main

    moto_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
