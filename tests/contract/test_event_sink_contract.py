"""One behaviour suite for the EventSink port, run against the in-memory fake and EventBridgeSink on the stack's moto
server over HTTP (a bus with a rule that targets an SQS queue, read back outside the port): every event arrives, in
order, with its detail type and detail, also past PutEvents' ten entries per call; an unreachable bus raises a
WapError (which core.downstream logs, never letting it change an outcome)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.fakes import FakeEventSink
from wap_ingest.adapters.aws.eventbridge import EventBridgeSink
from wap_ingest.core.downstream import SOURCE, DownstreamEvent
from wap_ingest.core.errors import WapError
from wap_ingest.core.ports import EventSink


@dataclass
class Harness:
    sink: EventSink
    received: Callable[[int], list[tuple[str, dict[str, Any]]]]  # (detail type, detail), as a consumer sees them
    break_it: Callable[[], None]


def _fake() -> Iterator[Harness]:
    sink = FakeEventSink()

    def down() -> None:
        sink.down = True

    yield Harness(sink, lambda _: [(e.detail_type, dict(e.detail)) for e in sink.events], down)


def _eventbridge(env: dict[str, str]) -> Iterator[Harness]:
    kwargs = {"endpoint_url": env["AWS_ENDPOINT_URL"], "region_name": env["AWS_REGION"]}
    events, sqs = boto3.client("events", **kwargs), boto3.client("sqs", **kwargs)
    name = f"contract-{uuid.uuid4().hex[:10]}"
    events.create_event_bus(Name=name)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventBusName=name, EventPattern=json.dumps({"source": [SOURCE]}))
    events.put_targets(Rule=name, EventBusName=name, Targets=[{"Id": "queue", "Arn": arn}])

    def received(expected: int) -> list[tuple[str, dict[str, Any]]]:
        got: list[tuple[str, dict[str, Any]]] = []
        for _ in range(10):
            for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                               WaitTimeSeconds=1).get("Messages", []):
                body = json.loads(message["Body"])
                assert body["source"] == SOURCE
                got.append((body["detail-type"], body["detail"]))
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
            if len(got) >= expected:
                break
        return got

    def down() -> None:  # nothing listens on port 9
        unreachable = boto3.client("events", endpoint_url="http://127.0.0.1:9", region_name=env["AWS_REGION"],
                                   config=Config(connect_timeout=1, retries={"max_attempts": 1}))
        harness.sink = EventBridgeSink(unreachable, name)

    harness = Harness(EventBridgeSink(events, name), received, down)
    yield harness


@pytest.fixture(params=["fake", pytest.param("eventbridge", marks=pytest.mark.stack)])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "fake":
        yield from _fake()
    else:
        yield from _eventbridge(request.getfixturevalue("stack_env"))


def events(n: int) -> list[DownstreamEvent]:
    return [DownstreamEvent("Table Published", {"tables": [f"wap.t{i}"], "rows": i, "merged_hash": f"h{i}"})
            for i in range(n)]


def test_every_event_arrives_with_its_type_and_detail(harness: Harness) -> None:
    harness.sink.publish(events(3))
    assert harness.received(3) == [("Table Published", {"tables": [f"wap.t{i}"], "rows": i, "merged_hash": f"h{i}"})
                                   for i in range(3)]


def test_more_than_ten_events_all_arrive(harness: Harness) -> None:
    harness.sink.publish(events(23))
    assert sorted(d["rows"] for _, d in harness.received(23)) == list(range(23))


def test_an_unreachable_bus_raises_a_wap_error(harness: Harness) -> None:
    harness.break_it()
    with pytest.raises(WapError):
        harness.sink.publish(events(1))
