"""The event shapes the function receives, read into the core's values with Powertools' typed event classes.

S3 notifications come in three shapes: a direct S3 event (`Records[].s3`, one or many records), an EventBridge
"Object Created" event, and either of them as the body of an SQS message (where S3 also sends `s3:TestEvent` when
the notification configuration is saved: it announces nothing). Keys arrive URL-encoded (`a+b%2Fc`) in S3 events;
they are decoded here. Optional fields (`versionId`, `sequencer`, identities) may be missing, as in moto's events.
A multipart upload may be announced twice (moto sends Put and CompleteMultipartUpload): `unique_objects` drops the
repeat. Besides: the dead-letter queue's CloudWatch alarm delivered by SNS, and an EMR Serverless job run's state
change. Which of these an invocation carries is decided in `entrypoints/inbound.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event, S3EventBridgeNotificationEvent

from wap_ingest.core.dead_letters import QueueAlarm
from wap_ingest.core.errors import BadInputError
from wap_ingest.core.models import SourceObject

JOB_STATE_CHANGE = "EMR Serverless Job Run State Change"


class UnreadableEventError(BadInputError):
    """An event or message that is not one this service understands."""


def first_record(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first of an event's `Records` (SQS, S3 and SNS events have them), if any."""
    records = event.get("Records")
    if isinstance(records, list) and records and isinstance(records[0], Mapping):
        return records[0]
    return None


def is_s3_event(event: Mapping[str, Any]) -> bool:
    record = first_record(event)
    return record is not None and record.get("eventSource") == "aws:s3"


def is_eventbridge_s3_event(event: Mapping[str, Any]) -> bool:
    return event.get("source") == "aws.s3" and "detail" in event


def is_job_state_change(event: Mapping[str, Any]) -> bool:
    return event.get("source") == "aws.emr-serverless" and event.get("detail-type") == JOB_STATE_CHANGE


def objects_from_notification(payload: Mapping[str, Any]) -> list[SourceObject]:
    """The objects an S3 notification (an S3 event, an EventBridge event, or S3's test event) announces as created.
    Anything else, or a notification missing a field it needs, is unreadable."""
    if payload.get("Event") == "s3:TestEvent":
        return []  # sent by S3 when the notification configuration is saved
    try:
        if is_s3_event(payload):
            return objects_from_s3_event(payload)
        if is_eventbridge_s3_event(payload):
            return objects_from_eventbridge(payload)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UnreadableEventError(f"malformed S3 notification: {type(exc).__name__} {exc}") from exc
    record = first_record(payload)
    if record is not None and record.get("eventSource") == "aws:sqs":
        raise UnreadableEventError("an SQS message inside an SQS message")
    raise UnreadableEventError(f"not an S3 notification (keys: {sorted(payload)[:8]}); expected an S3 event, an "
                               f"EventBridge S3 event or s3:TestEvent")


def objects_from_s3_event(event: Mapping[str, Any]) -> list[SourceObject]:
    found = []
    for record in S3Event(dict(event)).records:
        if not record.event_name.startswith("ObjectCreated"):
            continue
        obj = record.s3.get_object
        raw: Mapping[str, Any] = obj.raw_event
        found.append(_source(record.s3.bucket.name, unquote_plus(_text(obj.key, "key")), raw.get("size"),
                             raw.get("eTag"), raw.get("versionId")))
    return found


def objects_from_eventbridge(event: Mapping[str, Any]) -> list[SourceObject]:
    notification = S3EventBridgeNotificationEvent(dict(event))
    if notification.detail_type != "Object Created":
        return []
    raw: Mapping[str, Any] = notification.detail.object.raw_event
    return [_source(notification.detail.bucket.name, notification.detail.object.key, raw.get("size"),
                    raw.get("etag"), raw.get("version-id"))]


def json_object(body: str) -> Mapping[str, Any]:
    """An SQS message body as the JSON object it must be."""
    try:
        payload = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise UnreadableEventError(f"the message body is not JSON: {body[:120]!r}") from exc
    if not isinstance(payload, Mapping):
        raise UnreadableEventError(f"the message body is not a JSON object: {body[:120]!r}")
    return payload


def alarms_from_sns(event: Mapping[str, Any]) -> list[QueueAlarm]:
    """The CloudWatch alarm state changes an SNS event carries (other SNS messages are refused)."""
    alarms = []
    for record in event.get("Records") or []:
        try:
            message = json.loads(record["Sns"]["Message"])
            dimensions = message.get("Trigger", {}).get("Dimensions") or []
            queue = next((d.get("value") for d in dimensions if d.get("name") == "QueueName"), None)
            alarms.append(QueueAlarm(str(message["AlarmName"]), str(message["NewStateValue"]),
                                     str(message.get("NewStateReason", "")), queue,
                                     str(message.get("StateChangeTime", ""))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UnreadableEventError(f"an SNS message that is not a CloudWatch alarm: missing {exc}") from exc
    return alarms


def job_run_from(event: Mapping[str, Any]) -> tuple[str, str, str]:
    """(application id, job run id, state) of an EMR Serverless job run state change."""
    detail = event.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    found = tuple(str(detail.get(k) or "") for k in ("applicationId", "jobRunId", "state"))
    if not all(found):
        raise UnreadableEventError(f"an EMR Serverless state change without applicationId, jobRunId and state: "
                                   f"{sorted(detail)[:8]}")
    return found[0], found[1], found[2]


def unique_objects(objects: Iterable[SourceObject]) -> list[SourceObject]:
    """Drop repeats of one object version within a delivery (keeps the first, in order)."""
    seen: set[tuple[str, str, str | None]] = set()
    unique = []
    for obj in objects:
        marker = (obj.bucket, obj.key, obj.version_id or (obj.etag or "").strip('"') or None)
        if marker not in seen:
            seen.add(marker)
            unique.append(obj)
    return unique


def _source(bucket: object, key: object, size: object, etag: object, version_id: object) -> SourceObject:
    return SourceObject(bucket=_text(bucket, "bucket name"), key=_text(key, "key"), size=_int(size),
                        etag=str(etag) if etag else None, version_id=str(version_id) if version_id else None)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UnreadableEventError(f"an S3 notification whose object {what} is {value!r}, not a non-empty string")
    return value


def _int(value: object) -> int | None:
    try:
        return None if value is None else int(str(value))
    except ValueError:
        return None
