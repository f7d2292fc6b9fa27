"""S3 notifications in the three shapes they arrive in, read with Powertools' typed event classes:

- a direct S3 event (`Records[].s3`), one or many records;
- SQS messages whose body is an S3 event (or S3's `s3:TestEvent`, which is ignored), or an
  EventBridge event (EventBridge -> SQS);
- an EventBridge "Object Created" event.

Keys arrive URL-encoded (`a+b%2Fc`); they are decoded here. Optional fields (`versionId`, `sequencer`,
identities) may be missing, as in moto's events. A multipart upload may be announced twice (moto sends
Put and CompleteMultipartUpload): `unique_objects` drops the repeat.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event, S3EventBridgeNotificationEvent

from wap_ingest.core.dead_letters import QueueAlarm
from wap_ingest.core.errors import BadInputError
from wap_ingest.core.models import SourceObject


class UnreadableEventError(BadInputError):
    """A message that is not an S3 notification this service understands."""


class EventKind(enum.StrEnum):
    S3 = "s3"
    SQS = "sqs"
    EVENTBRIDGE = "eventbridge"
    ALARM = "alarm"  # a CloudWatch alarm (the dead-letter queue's depth) delivered by SNS
    JOB_STATE = "job_state"  # an EMR Serverless job run changed state (EventBridge): a large file's run ended
    MAINTAIN = "maintain"  # the maintenance schedule (serverless.yml: `{"wap_maintain": "all"}`): `wap maintain --all`


JOB_STATE_CHANGE = "EMR Serverless Job Run State Change"
MAINTAIN_KEY = "wap_maintain"  # the schedule's input


def job_run_from(event: Mapping[str, Any]) -> tuple[str, str, str]:
    """(application id, job run id, state) of an EMR Serverless job run state change."""
    detail = event.get("detail") or {}
    found = tuple(str(detail.get(k) or "") for k in ("applicationId", "jobRunId", "state"))
    if not all(found):
        raise UnreadableEventError(f"an EMR Serverless state change without applicationId, jobRunId and state: "
                                   f"{sorted(detail)[:8]}")
    return found[0], found[1], found[2]


def event_kind(event: Mapping[str, Any]) -> EventKind:
    records = event.get("Records")
    if isinstance(records, list) and records:
        source = records[0].get("eventSource") if isinstance(records[0], Mapping) else None
        if source == "aws:sqs":
            return EventKind.SQS
        if source == "aws:s3":
            return EventKind.S3
        if isinstance(records[0], Mapping) and records[0].get("EventSource") == "aws:sns":
            return EventKind.ALARM
    if event.get("source") == "aws.s3" and "detail" in event:
        return EventKind.EVENTBRIDGE
    if event.get("source") == "aws.emr-serverless" and event.get("detail-type") == JOB_STATE_CHANGE:
        return EventKind.JOB_STATE
    if event.get(MAINTAIN_KEY) == "all":
        return EventKind.MAINTAIN
    raise UnreadableEventError(f"unrecognised event (keys: {sorted(event)[:8]}); expected S3, SQS or EventBridge.")


def objects_from_s3_event(event: Mapping[str, Any]) -> list[SourceObject]:
    found = []
    for record in S3Event(dict(event)).records:
        if not record.event_name.startswith("ObjectCreated"):
            continue
        obj = record.s3.get_object
        raw: Mapping[str, Any] = obj.raw_event
        found.append(
            SourceObject(
                bucket=record.s3.bucket.name,
                key=unquote_plus(obj.key),
                size=_int(raw.get("size")),
                etag=(raw.get("eTag") or None),
                version_id=(raw.get("versionId") or None),
            )
        )
    return found


def objects_from_eventbridge(event: Mapping[str, Any]) -> list[SourceObject]:
    notification = S3EventBridgeNotificationEvent(dict(event))
    if notification.detail_type != "Object Created":
        return []
    raw: Mapping[str, Any] = notification.detail.object.raw_event
    return [
        SourceObject(
            bucket=notification.detail.bucket.name,
            key=notification.detail.object.key,
            size=_int(raw.get("size")),
            etag=raw.get("etag") or None,
            version_id=raw.get("version-id") or None,
        )
    ]


def objects_from_sqs_body(body: str) -> list[SourceObject]:
    try:
        payload = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise UnreadableEventError(f"the message body is not JSON: {body[:120]!r}") from exc
    if not isinstance(payload, Mapping):
        raise UnreadableEventError(f"the message body is not a JSON object: {body[:120]!r}")
    if payload.get("Event") == "s3:TestEvent":
        return []  # sent by S3 when the notification configuration is saved
    try:
        kind = event_kind(payload)
        if kind is EventKind.S3:
            return objects_from_s3_event(payload)
        if kind is EventKind.EVENTBRIDGE:
            return objects_from_eventbridge(payload)
    except (KeyError, TypeError) as exc:
        raise UnreadableEventError(f"malformed S3 notification: missing {exc}") from exc
    raise UnreadableEventError(f"an SQS message inside an SQS message: {body[:120]!r}")


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
        except (KeyError, TypeError, ValueError) as exc:
            raise UnreadableEventError(f"an SNS message that is not a CloudWatch alarm: missing {exc}") from exc
    return alarms


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


def _int(value: object) -> int | None:
    try:
        return None if value is None else int(str(value))
    except ValueError:
        return None
