"""The action records (core.once) in the lake bucket: one JSON object per action, `wap-requests/<action id>.claim.json`
(where a publish request's claim has always been: its action id is its request id), claimed with `If-None-Match: *`
and changed with `If-Match: <the ETag read>`, so that of two deliveries exactly one claims an action, and of two
retries exactly one takes it over. Each write carries a nonce: two writes of the same content still have two ETags.

The function's role may read and write `wap-requests/*` (infra/iam/lambda-policy.json, AnswerPublishRequests); the
lifecycle rule expires the records after seven days (lake_lifecycle.py), long after a forwarded Slack request (an
hour) or a publish request (fifteen minutes) could be served anyway.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import S3, Failure, aws_error, failure_of
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.once import ActionRecord, ActionRecords, Progress, checked_id
from wap_ingest.core.publish_requests import RESULT_PREFIX


class S3ActionRecords(ActionRecords):
    def __init__(self, s3: Any, bucket: str, prefix: str = f"{RESULT_PREFIX}/") -> None:
        self._s3, self._bucket, self._prefix = s3, bucket, prefix

    def _key(self, action_id: str) -> str:
        return f"{self._prefix}{checked_id(action_id)}.claim.json"

    def claim(self, action_id: str, message_id: str, what: str) -> tuple[ActionRecord, bool]:
        key = self._key(action_id)
        made = self._put(key, _document(action_id, message_id, Progress.STARTED, what), {"IfNoneMatch": "*"},
                         f"claiming {what}")
        if made is not None:
            return made, True
        found = self._read(key, what)
        if found is None:  # written by another delivery, and gone or unreadable since: the message is retried
            raise InfrastructureError(f"the record of {what} exists but could not be read yet; the message is retried.")
        return found, False

    def change(self, record: ActionRecord, progress: Progress) -> ActionRecord | None:
        document = _document(record.action_id, record.message_id, progress, record.what)
        return self._put(self._key(record.action_id), document, {"IfMatch": record.version},
                         f"marking {record.what} {progress.value}")

    def _put(self, key: str, document: dict[str, Any], condition: dict[str, str], doing: str) -> ActionRecord | None:
        try:
            answer = self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps(document).encode(),
                                         ContentType="application/json", **condition)
        except (ClientError, BotoCoreError) as exc:
            # 412 (409: a concurrent conditional write): written by somebody else first; 404: the If-Match one is gone
            if failure_of(exc) in (Failure.PRECONDITION, Failure.MISSING):
                return None
            raise self._error(exc, doing, key) from exc
        return _record(document, str(answer["ETag"]))

    def _read(self, key: str, what: str) -> ActionRecord | None:
        try:
            answer = self._s3.get_object(Bucket=self._bucket, Key=key)
            document = json.loads(answer["Body"].read())
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.MISSING:
                return None
            raise self._error(exc, f"reading the record of {what}", key) from exc
        except ValueError:
            return None
        return _record(document, str(answer["ETag"])) if isinstance(document, dict) else None

    def _error(self, exc: ClientError | BotoCoreError, doing: str, key: str) -> WapError:
        return aws_error(exc, service=S3, doing=doing, resource=f"s3://{self._bucket}/{key}", setting="LAKE_BUCKET")


def _document(action_id: str, message_id: str, progress: Progress, what: str) -> dict[str, Any]:
    return {"action_id": action_id, "message_id": message_id, "progress": progress.value, "what": what,
            "at": datetime.now(UTC).isoformat(), "nonce": uuid.uuid4().hex}


def _record(document: dict[str, Any], etag: str) -> ActionRecord:
    """A stored record; one written before records said how far they got (a publish request's claim: `request_id`,
    `message_id`, `claimed_at`) reads as started."""
    try:
        progress = Progress(str(document.get("progress")))
    except ValueError:
        progress = Progress.STARTED
    action_id = str(document.get("action_id") or document.get("request_id") or "")
    return ActionRecord(action_id, str(document.get("message_id") or ""), progress,
                        str(document.get("what") or f"publish request {action_id}"),
                        str(document.get("at") or document.get("claimed_at") or ""), etag)
