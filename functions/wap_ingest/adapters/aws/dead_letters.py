"""The dead-letter queue seen by an operator (`wap dlq list|redrive`, the alarm's Show in Slack): what is there, and
replaying it into the ingest queue (each message once: sent to the queue, then deleted from the dead-letter queue).

A dead letter's body is shown by allow list, never as it is (`shown_body`, `DeadLetter.line`): of each kind of
message this service reads, only the fields known to be safe to show (an S3 notification's buckets, keys, sizes and
versions; a publish request's branch, reason and times; a Slack action's person, action, target and reason), and of
anything else only its size and a digest. So no signature, no session token, no `response_url`, no Slack token (a
payload's deprecated verification `token`), no form's `private_metadata`, and no field nobody foresaw reaches a
terminal, a log line or Slack. The raw body is used only to send the message back to the queue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import SQS, aws_error
from wap_ingest.adapters.slack import KIND as SLACK_ACTION
from wap_ingest.adapters.slack import interaction_from
from wap_ingest.core.errors import BadInputError
from wap_ingest.core.publish_requests import KIND as PUBLISH_REQUEST

PEEK_SECONDS = 30  # a listed message is hidden this long, then visible again (listing changes nothing else)
HIDDEN = "(not shown)"
_TEXT = 300  # a shown string's longest
_OBJECT = {"key": "key", "size": "size", "eTag": "etag", "versionId": "version_id", "sequencer": "sequencer"}
_EVENTBRIDGE_OBJECT = {"key": "key", "size": "size", "etag": "etag", "version-id": "version_id",
                       "sequencer": "sequencer"}
_PUBLISH = ("kind", "format", "request_id", "branch", "reason", "reaudit", "queue", "issued_at", "expires_at")


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receive_count: int
    sent_at: str  # epoch milliseconds, as SQS gives it
    objects: tuple[str, ...]  # the s3:// objects its body names, when it is an S3 notification
    body: str = field(repr=False)  # as it came: never shown (`shown`, `line`)

    @property
    def shown(self) -> dict[str, Any]:
        return shown_body(self.body)

    @property
    def line(self) -> str:
        """One line for a listing: the message, its receive count, and what it is (by allow list)."""
        return f"{self.message_id}  received {self.receive_count}x  {summary_of(self.body)}"

    def to_dict(self) -> dict[str, object]:
        return {"message_id": self.message_id, "receive_count": self.receive_count, "sent_at": self.sent_at,
                "objects": list(self.objects), "body": self.shown}


def objects_named(body: str) -> tuple[str, ...]:
    """The s3:// URIs an S3 notification body names (keys as S3 sent them), () for anything else."""
    try:
        records = json.loads(body).get("Records") or []
        return tuple(f"s3://{r['s3']['bucket']['name']}/{r['s3']['object']['key']}" for r in records)
    except (ValueError, AttributeError, KeyError, TypeError):
        return ()


def _text(value: Any) -> str | None:
    return value[:_TEXT] if isinstance(value, str) else None


def _scalar(value: Any) -> str | int | bool | None:
    return value if isinstance(value, bool | int) else _text(value)


def _picked(data: Any, names: Mapping[str, str]) -> dict[str, Any]:
    """The allow-listed fields of a JSON object, renamed, each a plain value (anything else is left out)."""
    if not isinstance(data, Mapping):
        return {}
    return {shown: _scalar(data[name]) for name, shown in names.items() if _scalar(data.get(name)) is not None}


def _at(data: Any, *path: str) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data


def _notification(data: Mapping[str, Any]) -> dict[str, Any]:
    given = data.get("Records")
    records = given if isinstance(given, list) else []
    return {"kind": "s3 notification", "records": [
        _picked(r, {"eventName": "event", "eventTime": "time"}) | {"bucket": _text(_at(r, "s3", "bucket", "name"))}
        | _picked(_at(r, "s3", "object"), _OBJECT) for r in records]}


def _eventbridge(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "eventbridge s3 event"} | _picked(data, {"detail-type": "event", "time": "time"}) | {
        "bucket": _text(_at(data, "detail", "bucket", "name"))} | _picked(_at(data, "detail", "object"),
                                                                          _EVENTBRIDGE_OBJECT)


def _publish_request(data: Mapping[str, Any]) -> dict[str, Any]:
    shown = _picked(data, {name: name for name in _PUBLISH})
    proof = data.get("proof")
    if isinstance(proof, Mapping):
        # the digest is the request's own (SHA-256 of the fields above): it names the request, it signs nothing
        shown["proof"] = _picked(proof, {"scheme": "scheme", "endpoint": "endpoint", "digest": "digest"}) | {
            "signature": HIDDEN}
    if "token" in data:
        shown["token"] = HIDDEN
    return shown


def _slack_action(data: Mapping[str, Any]) -> dict[str, Any]:
    stamp = data.get("timestamp")
    shown: dict[str, Any] = {"kind": SLACK_ACTION, "signature": HIDDEN}
    if isinstance(stamp, str) and stamp.isascii() and stamp.isdigit() and len(stamp) <= 12:
        shown["timestamp"] = stamp
    body = data.get("body")
    try:
        asked = interaction_from(body) if isinstance(body, str) else None
    except BadInputError:
        asked = None
    if asked is None:
        return shown | {"interaction": HIDDEN}
    return shown | {"interaction": {k: v for k, v in {
        "type": _text(asked.kind), "user": _text(asked.person.user_id), "name": _text(asked.person.name),
        "action": asked.action.value if asked.action else None, "target": _text(asked.target),
        "channel": _text(asked.channel), "message_ts": _text(asked.message_ts), "reason": _text(asked.reason),
    }.items() if v is not None}}


def shown_body(body: str) -> dict[str, Any]:
    """What may be shown of a message body: the allow-listed fields of the kinds of message this service reads; of
    anything else, its size and the start of its SHA-256 (to tell two apart), nothing of its content."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        if data.get("kind") == SLACK_ACTION:
            return _slack_action(data)
        if data.get("kind") == PUBLISH_REQUEST:
            return _publish_request(data)
        if isinstance(data.get("Records"), list):
            return _notification(data)
        if data.get("source") == "aws.s3":
            return _eventbridge(data)
        if data.get("Event") == "s3:TestEvent":
            return {"kind": "s3 test event", "bucket": _text(data.get("Bucket"))}
    return {"kind": "unknown", "bytes": len(body.encode()), "sha256": hashlib.sha256(body.encode()).hexdigest()[:16],
            "content": HIDDEN}


def summary_of(body: str) -> str:
    """One line about a message body, from its shown fields only."""
    shown = shown_body(body)
    kind = shown.get("kind")
    if kind == "s3 notification":
        return ", ".join(f"s3://{r.get('bucket')}/{r.get('key')}" for r in shown["records"]) or "an empty notification"
    if kind == "eventbridge s3 event":
        return f"s3://{shown.get('bucket')}/{shown.get('key')} (EventBridge)"
    if kind == PUBLISH_REQUEST:
        return f"publish request {shown.get('request_id')} for {shown.get('branch')}"
    if kind == SLACK_ACTION:
        asked = shown["interaction"]
        if not isinstance(asked, dict):
            return "a Slack action (unreadable)"
        return f"Slack action {asked.get('action')} on {asked.get('target')} by {asked.get('user')}"
    if kind == "unknown":
        return f"an unknown message ({shown['bytes']} bytes, sha256 {shown['sha256']}...; its content is not shown)"
    return str(kind)


class SqsDeadLetters:
    def __init__(self, client: Any, dead_letter_url: str, queue_url: str, *, peek_seconds: int = PEEK_SECONDS) -> None:
        self._sqs, self._dlq, self._queue, self._peek = client, dead_letter_url, queue_url, peek_seconds

    def peek(self, limit: int = 100) -> list[DeadLetter]:
        """Up to `limit` messages (each read hides it for PEEK_SECONDS: list again after that to see it again)."""
        found: dict[str, DeadLetter] = {}
        for message in self._receive(limit, self._peek):
            attributes = message.get("Attributes", {})
            found.setdefault(message["MessageId"], DeadLetter(
                message["MessageId"], int(attributes.get("ApproximateReceiveCount", 0)),
                str(attributes.get("SentTimestamp", "")), objects_named(message["Body"]), message["Body"]))
        return list(found.values())

    def redrive(self, limit: int = 100) -> list[str]:
        """Move up to `limit` messages back to the ingest queue; the ids moved. A message is deleted from the
        dead-letter queue only after the ingest queue accepted it."""
        moved: list[str] = []
        for message in self._receive(limit, 120):
            try:
                self._sqs.send_message(QueueUrl=self._queue, MessageBody=message["Body"])
                self._sqs.delete_message(QueueUrl=self._dlq, ReceiptHandle=message["ReceiptHandle"])
            except (ClientError, BotoCoreError) as exc:
                raise aws_error(exc, service=SQS, doing=f"redriving message {message['MessageId']} ({len(moved)} "
                                f"moved before it) from {self._dlq} to", resource=self._queue,
                                setting="WAP_QUEUE_URL (or --queue-url)") from exc
            moved.append(str(message["MessageId"]))
        return moved

    def _receive(self, limit: int, hide_seconds: int) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        try:
            while len(got) < limit:
                batch = self._sqs.receive_message(
                    QueueUrl=self._dlq, MaxNumberOfMessages=min(10, limit - len(got)), WaitTimeSeconds=1,
                    VisibilityTimeout=hide_seconds, AttributeNames=["All"]).get("Messages", [])
                if not batch:
                    return got
                got += batch
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=SQS, doing="reading the dead-letter queue", resource=self._dlq,
                            setting="WAP_DEAD_LETTER_QUEUE_URL (or --dlq-url)") from exc
        return got
