"""S3DecisionLog: the DecisionLog port on S3, one JSON object per decision in the lake bucket.

Why S3 and not a Nessie commit: a discard changes nothing in the catalog, Nessie 0.99 refuses a commit
with no operations, and a commit that puts a marker would add content (a namespace or a table) to `main`
that every reader of the catalog then sees, and race with the writers of `main` for its hash. An object per
decision never conflicts, is never overwritten (the key holds the time and the branch), survives the branch,
and the operator already needs the lake bucket. Keys sort by time:

    s3://<LAKE_BUCKET>/wap-decisions/<namespace>.<table>/<YYYYmmddTHHMMSSffffffZ>-<branch>.json
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.aws.errors import S3, Failure, aws_error
from wap_ingest.core.errors import CatalogError, WapError
from wap_ingest.core.models import DecisionRecord, TableRef
from wap_ingest.core.ports import DecisionLog
from wap_ingest.core.review import parse_time

PREFIX = "wap-decisions"
# A record is written once (If-None-Match): a refused condition is a decision already there, never retried
_WRITE_ONCE = {Failure.PRECONDITION: Verdict(
    CatalogError, "a decision on the same branch at the same instant is already recorded; decisions are never "
    "overwritten", "decide again (a new instant)")}


class S3DecisionLog(DecisionLog):
    def __init__(self, client: Any, bucket: str, prefix: str = PREFIX) -> None:
        self._s3 = client
        self._bucket = bucket
        self._prefix = prefix.strip("/")

    def key_for(self, record: DecisionRecord) -> str:
        stamp = parse_time(record.decided_at).strftime("%Y%m%dT%H%M%S%fZ")
        return f"{self._prefix}/{record.table}/{stamp}-{record.branch}.json"

    def record(self, decision: DecisionRecord) -> str:
        key = self.key_for(decision)
        body = json.dumps(decision.to_dict(), indent=2).encode("utf-8")
        with self._translated(f"recording the decision on {decision.branch!r} at", key):
            # IfNoneMatch: never overwrite an earlier decision (S3 conditional write; moto honours it too).
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=body, ContentType="application/json",
                                IfNoneMatch="*")
        return f"s3://{self._bucket}/{key}"

    def decisions(self, table: TableRef, limit: int = 100) -> list[DecisionRecord]:
        prefix = f"{self._prefix}/{table.qualified}/"
        keys: list[str] = []
        with self._translated(f"listing the decisions on {table} under", prefix):
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
                keys += [str(item["Key"]) for item in page.get("Contents", [])]
        found = []
        for key in sorted(keys, reverse=True)[:limit]:
            with self._translated("reading the decision", key):
                body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
            try:
                found.append(DecisionRecord.from_dict(json.loads(body)))
            except (ValueError, TypeError) as exc:
                raise WapError(f"s3://{self._bucket}/{key} is not a decision record ({exc}). Fix: move it out of "
                               f"{self._prefix}/ (only `wap discard` and `wap prune` write there).") from exc
        return found

    @contextmanager
    def _translated(self, doing: str, key: str) -> Iterator[None]:
        """S3's errors through the one AWS table (adapters/aws/errors.py)."""
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=S3, doing=doing, resource=f"s3://{self._bucket}/{key}",
                            setting="LAKE_BUCKET", special=_WRITE_ONCE) from exc
