"""The dead-letter queue seen by an operator (`wap dlq list|redrive`): what is there, and replaying it into the
ingest queue (each message once: sent to the queue, then deleted from the dead-letter queue)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .aws_errors import SQS, aws_error

PEEK_SECONDS = 30  # a listed message is hidden this long, then visible again (listing changes nothing else)


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receive_count: int
    sent_at: str  # epoch milliseconds, as SQS gives it
    objects: tuple[str, ...]  # the s3:// objects its body names, when it is an S3 notification
    body: str

    def to_dict(self) -> dict[str, object]:
        return {"message_id": self.message_id, "receive_count": self.receive_count, "sent_at": self.sent_at,
                "objects": list(self.objects), "body": self.body}


def objects_named(body: str) -> tuple[str, ...]:
    """The s3:// URIs an S3 notification body names (keys as S3 sent them), () for anything else."""
    try:
        records = json.loads(body).get("Records") or []
        return tuple(f"s3://{r['s3']['bucket']['name']}/{r['s3']['object']['key']}" for r in records)
    except (ValueError, AttributeError, KeyError, TypeError):
        return ()


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
