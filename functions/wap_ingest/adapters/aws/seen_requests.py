"""The Slack requests the interactivity endpoint served in the last minutes, so that each is served once.

A request's signature is recorded in the lake bucket (`wap-slack-requests/<sha256 of the signature>`) with a
conditional put (If-None-Match): a second put of the same request is refused by S3 itself, across invocations and
concurrent ones. Five minutes later its timestamp refuses it anyway (adapters/slack/incoming.py); the lifecycle
rule removes the records after a day (lake_lifecycle.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import S3, Failure, aws_error, failure_of

SEEN_PREFIX = "wap-slack-requests/"


class SeenRequests:
    """The requests served in the last minutes, in the lake bucket (a conditional put each)."""

    def __init__(self, client: Any, bucket: str, prefix: str = SEEN_PREFIX) -> None:
        self._s3, self._bucket, self._prefix = client, bucket, prefix

    def first_time(self, signature: str, timestamp: str) -> bool:
        """Record the request signed `signature` at `timestamp`; False when it was recorded before (a replay)."""
        key = self._prefix + hashlib.sha256(signature.encode()).hexdigest()
        try:
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps({"timestamp": timestamp}),
                                ContentType="application/json", IfNoneMatch="*")
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.PRECONDITION:
                return False
            raise aws_error(exc, service=S3, doing="recording a Slack request (replay protection) in",
                            resource=f"s3://{self._bucket}/{key}", setting="LAKE_BUCKET") from exc
        return True
