"""S3ReportStore: the ReportStore port on S3. A rejected run's report is one JSON object per branch,
`s3://<lake bucket>/wap-reports/<branch>.json`, read back by `wap show BRANCH`. The same store, under another prefix,
keeps the answers to publish requests (adapters/publish_requests.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.core.errors import ObjectStoreUnavailableError
from wap_ingest.core.ports import ReportStore

REPORTS_PREFIX = "wap-reports/"
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3ReportStore(ReportStore):
    def __init__(self, client: Any, bucket: str, prefix: str = REPORTS_PREFIX, what: str = "the audit report") -> None:
        self._s3 = client
        self._bucket = bucket
        self._prefix = prefix
        self._what = what  # what a document is, for the messages

    def _key(self, branch: str) -> str:
        return f"{self._prefix}{branch}.json"  # branch names are [A-Za-z0-9_.-] (core.naming)

    def uri(self, name: str) -> str:
        return f"s3://{self._bucket}/{self._key(name)}"

    def save(self, branch: str, document: Mapping[str, object]) -> str:
        uri = self.uri(branch)
        body = json.dumps(document, indent=2, default=str).encode()
        try:
            self._s3.put_object(Bucket=self._bucket, Key=self._key(branch), Body=body,
                                ContentType="application/json")
        except (ClientError, BotoCoreError) as exc:
            raise ObjectStoreUnavailableError(
                f"storing {self._what} {uri}: {exc}. Fix: check that LAKE_BUCKET={self._bucket} exists and "
                f"that this role may s3:PutObject under {self._prefix}."
            ) from exc
        return uri

    def load(self, branch: str) -> dict[str, object] | None:
        uri = self.uri(branch)
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=self._key(branch))["Body"].read()
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _NOT_FOUND:
                return None
            raise ObjectStoreUnavailableError(f"reading {self._what} {uri}: {exc}") from exc
        except BotoCoreError as exc:
            raise ObjectStoreUnavailableError(f"reading {self._what} {uri}: {exc}") from exc
        document = json.loads(body)
        return document if isinstance(document, dict) else None
