"""What an invocation of the function asks for: a raw Lambda event turned into one typed request.

| the event | the request |
|---|---|
| SQS (`Records[].eventSource == "aws:sqs"`) | `SqsBatch`: one `SqsMessage` per record, each carrying one of the below |
| a direct S3 event, an EventBridge "Object Created" event | `ObjectVersions` |
| SNS (`Records[].EventSource == "aws:sns"`) | `Alarms`: the dead-letter queue's CloudWatch alarm |
| EventBridge "EMR Serverless Job Run State Change" | `JobStateChange`: a large file's run ended |
| `{"wap_maintain": "all"}` (serverless.yml's schedule) | `Schedule`: maintain every table on main |
| anything else | `UnreadableEventError` (the invocation fails) |

An SQS message carries `ObjectVersions` (its body is an S3 or EventBridge notification; S3's test event announces
none), a `PublishRequest` (an operator's `wap publish`, `{"kind": "wap.publish-request"}`), a `SignedRequest` (an
action asked from an alert in Slack, handed over by the interactivity endpoint, `{"kind": "wap.slack-action"}`), or,
when it is none of these or not even JSON, `Unreadable`: that message's own failure, decided here once, never the
batch's. Each body is parsed once and its kind read from its shape.

Each object version travels with its delivery (`core.ingest.Delivery`): the SQS receive count as the attempt, the
queue's maxReceiveCount, and a correlation id (the SQS message id, or the invocation's request id, and the key)
that is stable across redeliveries of one message.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from wap_ingest.adapters.slack import KIND as SLACK_ACTION
from wap_ingest.adapters.slack import SignedRequest
from wap_ingest.core.dead_letters import QueueAlarm
from wap_ingest.core.errors import BadInputError
from wap_ingest.core.ingest import Delivery, Item
from wap_ingest.core.models import SourceObject
from wap_ingest.core.publish_requests import KIND as PUBLISH_REQUEST
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.events import (
    UnreadableEventError,
    alarms_from_sns,
    first_record,
    is_eventbridge_s3_event,
    is_job_state_change,
    is_s3_event,
    job_run_from,
    json_object,
    objects_from_notification,
    unique_objects,
)

MAINTAIN_KEY = "wap_maintain"  # the schedule's input


class EventKind(enum.StrEnum):
    S3 = "s3"
    SQS = "sqs"
    EVENTBRIDGE = "eventbridge"
    ALARM = "alarm"  # a CloudWatch alarm (the dead-letter queue's depth) delivered by SNS
    JOB_STATE = "job_state"  # an EMR Serverless job run changed state (EventBridge): a large file's run ended
    MAINTAIN = "maintain"  # the maintenance schedule: `wap maintain --all`


@dataclass(frozen=True)
class ObjectVersions:
    """Object versions to ingest, each with its delivery; `kind` is the notification's shape."""

    kind: EventKind
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Unreadable:
    """A message this service cannot read: it fails alone (and is alerted on its first and last attempt)."""

    reason: str


@dataclass(frozen=True)
class SqsMessage:
    """One SQS message: what it asks for, and what its retry back-off needs."""

    message_id: str
    queue_arn: str
    receipt_handle: str
    delivery: Delivery  # attempt: the receive count; max_attempts: the queue's maxReceiveCount
    request: ObjectVersions | PublishRequest | SignedRequest | Unreadable

    @property
    def receive_count(self) -> int:
        return self.delivery.attempt or 1


@dataclass(frozen=True)
class SqsBatch:
    kind: ClassVar[EventKind] = EventKind.SQS
    messages: tuple[SqsMessage, ...]


@dataclass(frozen=True)
class Alarms:
    kind: ClassVar[EventKind] = EventKind.ALARM
    alarms: tuple[QueueAlarm, ...]


@dataclass(frozen=True)
class JobStateChange:
    kind: ClassVar[EventKind] = EventKind.JOB_STATE
    application_id: str
    job_run_id: str
    state: str


@dataclass(frozen=True)
class Schedule:
    kind: ClassVar[EventKind] = EventKind.MAINTAIN


Request = SqsBatch | ObjectVersions | Alarms | JobStateChange | Schedule


def request_from(event: Mapping[str, Any], *, origin: str, max_receives: int | None) -> Request:
    """The request an invocation's event carries. `origin` names a direct invocation in its objects' correlation
    ids (the Lambda request id); `max_receives` is the queue's maxReceiveCount (an SQS message's last attempt)."""
    record = first_record(event)
    if record is not None and record.get("eventSource") == "aws:sqs":
        return SqsBatch(tuple(message_from(SQSRecord(r), max_receives) for r in event["Records"]))
    if record is not None and record.get("EventSource") == "aws:sns":
        return Alarms(tuple(alarms_from_sns(event)))
    if is_s3_event(event):
        return _objects(EventKind.S3, objects_from_notification(event), Delivery(), origin)
    if is_eventbridge_s3_event(event):
        return _objects(EventKind.EVENTBRIDGE, objects_from_notification(event), Delivery(), origin)
    if is_job_state_change(event):
        return JobStateChange(*job_run_from(event))
    if event.get(MAINTAIN_KEY) == "all":
        return Schedule()
    raise UnreadableEventError(f"unrecognised event (keys: {sorted(event)[:8]}); expected SQS, S3, EventBridge, "
                               f"SNS or {{\"{MAINTAIN_KEY}\": \"all\"}}.")


def message_from(record: SQSRecord, max_receives: int | None) -> SqsMessage:
    """One SQS message read once: its objects, its publish request, or why it cannot be read (whatever the body
    holds, reading it never raises: a message no reader foresaw is that message's failure)."""
    delivery = Delivery(_receive_count(record), max_receives)
    request: ObjectVersions | PublishRequest | SignedRequest | Unreadable
    try:
        request = _request_in(record.body, record.message_id, delivery)
    except BadInputError as exc:
        request = Unreadable(str(exc))
    except Exception as exc:  # a shape no reader foresaw
        request = Unreadable(f"unexpected {type(exc).__name__} reading the message: {exc}")
    return SqsMessage(record.message_id, record.event_source_arn, record.receipt_handle, delivery, request)


def correlation_id_for(origin: str, source: SourceObject) -> str:
    """Stable across redeliveries of one SQS message: its retries share the id."""
    return f"{origin}:{source.key}"


def _request_in(body: str, message_id: str, delivery: Delivery) -> ObjectVersions | PublishRequest | SignedRequest:
    payload = json_object(body)
    if payload.get("kind") == SLACK_ACTION:
        return SignedRequest.from_message(payload)  # one without its signature raises BadInputError
    if payload.get("kind") == PUBLISH_REQUEST:
        request = PublishRequest.from_body(body)  # a malformed one raises BadInputError
        if request is not None:
            return request
    kind = EventKind.EVENTBRIDGE if is_eventbridge_s3_event(payload) else EventKind.S3
    return _objects(kind, objects_from_notification(payload), delivery, message_id)


def _objects(kind: EventKind, sources: list[SourceObject], delivery: Delivery, origin: str) -> ObjectVersions:
    return ObjectVersions(kind, tuple(
        Item(s, Delivery(delivery.attempt, delivery.max_attempts, correlation_id_for(origin, s)))
        for s in unique_objects(sources)))


def _receive_count(record: SQSRecord) -> int:
    try:
        return max(1, int(record.attributes.approximate_receive_count or 1))
    except (KeyError, TypeError, ValueError):
        return 1

