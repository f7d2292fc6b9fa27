"""S3ReportStore: the ReportStore port on S3. A rejected run's report is one JSON object per branch,
`s3://<lake bucket>/wap-reports/<branch>.json`, read back by `wap show BRANCH`. The same store, under another prefix,
keeps the answers to publish requests (adapters/aws/publish_requests.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import S3, Failure, aws_error, failure_of
from wap_ingest.core.ports import ReportStore

REPORTS_PREFIX = "wap-reports/"


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
            raise aws_error(exc, service=S3, doing=f"storing {self._what}", resource=uri,
                            setting="LAKE_BUCKET") from exc
        return uri

    def load(self, branch: str) -> dict[str, object] | None:
        uri = self.uri(branch)
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=self._key(branch))["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.MISSING:
                return None  # none kept (never rejected, or expired by the lifecycle rule)
            raise aws_error(exc, service=S3, doing=f"reading {self._what}", resource=uri,
                            setting="LAKE_BUCKET") from exc
        document = json.loads(body)
        return document if isinstance(document, dict) else None
