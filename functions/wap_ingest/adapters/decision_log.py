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

from wap_ingest.core.errors import CatalogError, ConfigError, ObjectStoreUnavailableError, WapError
from wap_ingest.core.models import DecisionRecord, TableRef
from wap_ingest.core.ports import DecisionLog
from wap_ingest.core.review import parse_time

PREFIX = "wap-decisions"


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
        with self._translated(f"recording the decision on {decision.branch!r}"):
            # IfNoneMatch: never overwrite an earlier decision (S3 conditional write; moto honours it too).
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=body, ContentType="application/json",
                                IfNoneMatch="*")
        return f"s3://{self._bucket}/{key}"

    def decisions(self, table: TableRef, limit: int = 100) -> list[DecisionRecord]:
        prefix = f"{self._prefix}/{table.qualified}/"
        keys: list[str] = []
        with self._translated(f"listing the decisions on {table}"):
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
                keys += [str(item["Key"]) for item in page.get("Contents", [])]
        found = []
        for key in sorted(keys, reverse=True)[:limit]:
            with self._translated(f"reading s3://{self._bucket}/{key}"):
                body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
            try:
                found.append(DecisionRecord.from_dict(json.loads(body)))
            except (ValueError, TypeError) as exc:
                raise WapError(f"s3://{self._bucket}/{key} is not a decision record ({exc}). Fix: move it out of "
                               f"{self._prefix}/ (only `wap discard` and `wap prune` write there).") from exc
        return found

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        """S3 errors at the boundary: a missing bucket or a denial is a setting to fix, anything else an outage."""
        try:
            yield
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "NoSuchBucket":
                raise ConfigError(f"{doing}: the lake bucket {self._bucket!r} does not exist. Fix: check "
                                  f"LAKE_BUCKET.") from exc
            if code in ("AccessDenied", "403"):
                raise ConfigError(f"{doing}: access to s3://{self._bucket}/{self._prefix}/ denied. Fix: allow "
                                  f"s3:PutObject, s3:GetObject and s3:ListBucket there for the operator.") from exc
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):  # never retried: it can never succeed
                raise CatalogError(f"{doing}: a decision on the same branch at the same instant is already recorded; "
                                   f"decisions are never overwritten. Fix: decide again (a new instant).") from exc
            raise ObjectStoreUnavailableError(f"{doing}: S3 failed ({code or exc}).") from exc
        except BotoCoreError as exc:
            raise ObjectStoreUnavailableError(f"{doing}: S3 is unreachable ({type(exc).__name__}).") from exc
