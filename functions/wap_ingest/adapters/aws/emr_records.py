"""The large files' job records in the lake bucket (`wap-emr/<table>/<digest>.json`, one per object version): the one
truth about a file's EMR runs, shared by the event path (a delivery, EMR's state-change event), the scheduled sweep and
the job itself.

Every change is a conditional write: the first with `If-None-Match: *` (only one delivery claims a version), every
later one with `If-Match: <the ETag read>`, so of two writers that read the same record (the event path and the
sweep resubmitting the same failed run) exactly one wins; the other is told (None) and reads the record again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import S3, Failure, aws_error, failure_of
from wap_ingest.core.errors import WapError

RECORD_PREFIX = "wap-emr"


@dataclass(frozen=True)
class Stored:
    """A record as read, with the ETag a conditional write names."""

    key: str
    body: dict[str, Any]
    etag: str


class EmrRecords:
    def __init__(self, s3_client: Any, bucket: str) -> None:
        self._s3, self.bucket = s3_client, bucket

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def create(self, key: str, body: dict[str, Any]) -> Stored | None:
        """Write the record if there is none; None when one exists (another delivery claimed the version)."""
        return self._put(key, body, {"IfNoneMatch": "*"}, "claiming the EMR submission at")

    def replace(self, current: Stored, body: dict[str, Any]) -> Stored | None:
        """Replace `current` with `body` if nobody changed it since it was read; None when somebody did (or deleted
        it): read it again."""
        return self._put(current.key, body, {"IfMatch": current.etag}, "updating the EMR submission record")

    def read(self, key: str) -> Stored | None:
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=key)
            body = json.loads(answer["Body"].read())
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.MISSING:
                return None
            raise self._error(exc, "reading the EMR submission record", key) from exc
        return Stored(key, body, str(answer["ETag"])) if isinstance(body, dict) else None

    def delete(self, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "releasing the EMR submission claim", key) from exc

    def listed(self, prefix: str = f"{RECORD_PREFIX}/") -> Iterator[str]:
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    if str(item["Key"]).endswith(".json"):
                        yield str(item["Key"])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=S3, doing="listing the EMR job records in", resource=self.uri(prefix),
                            setting="LAKE_BUCKET") from exc

    def _put(self, key: str, body: dict[str, Any], condition: dict[str, str], doing: str) -> Stored | None:
        try:
            answer = self._s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(body).encode(),
                                         ContentType="application/json", **condition)
        except (ClientError, BotoCoreError) as exc:
            # 412 (or 409, a concurrent conditional write): somebody else wrote first; 404: the If-Match record is gone
            if failure_of(exc) in (Failure.PRECONDITION, Failure.MISSING):
                return None
            raise self._error(exc, doing, key) from exc
        return Stored(key, body, str(answer["ETag"]))

    def _error(self, exc: ClientError | BotoCoreError, doing: str, key: str) -> WapError:
        return aws_error(exc, service=S3, doing=doing, resource=self.uri(key), setting="LAKE_BUCKET")
