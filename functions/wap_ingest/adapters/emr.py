"""EmrServerlessJobs: the LargeFileJobs port on EMR Serverless (boto3 `emr-serverless`).

A large file becomes one job run whose entry point (wap_ingest/entrypoints/emr_job.py, uploaded by
`make emr-artifacts`) runs the same pipeline in the cluster. At most once per object version, twice over:
- a record in the lake bucket (`wap-emr/<table>/<digest>.json`), created with If-None-Match so only one
  delivery of the event submits, and updated with the job run id (what `wap branches`/`wap history` show);
- a client token derived from the object version, so a retried submission after a crash between the two
  steps is deduplicated by EMR itself.
The request carries no secret: the job reads the Slack token and the Nessie client secret from their
parameters (SSM / Secrets Manager) at start, as the function does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs

log = logging.getLogger(__name__)

RECORD_PREFIX = "wap-emr"

def digest_of(source: SourceObject) -> str:
    return hashlib.sha256(source.identity.encode("utf-8")).hexdigest()


def record_key(table: TableRef, source: SourceObject) -> str:
    return f"{RECORD_PREFIX}/{table.qualified}/{digest_of(source)[:32]}.json"


def parse_submit_parameters(parameters: str) -> dict[str, str]:
    """`--conf k=v ...` back to a dict (the local runner and the tests read the request this way)."""
    words, conf = shlex.split(parameters), {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag != "--conf":
            raise ValueError(f"unexpected spark-submit parameter {flag!r}")
        key, _, val = value.partition("=")
        conf[key] = val
    return conf




class EmrServerlessJobs(LargeFileJobs):
    def __init__(self, emr_client: Any, s3_client: Any, *, lake_bucket: str, application_id: str,
                 request_for: Callable[[SourceObject, TableRef], dict[str, Any]]) -> None:
        """`request_for` makes the `start_job_run` arguments for one object version (wap_ingest.emr_request)."""
        self._emr, self._s3, self._bucket = emr_client, s3_client, lake_bucket
        self._application_id, self._request_for = application_id, request_for

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        key = record_key(table, source)
        record = {"object": source.uri, "bucket": source.bucket, "key": source.key, "identity": source.identity,
                  "table": table.qualified, "application_id": self._application_id,
                  "claimed_at": _now()}
        if not self._claim(key, record):
            existing = self._read(key)
            if existing is not None and existing.get("job_run_id"):
                log.info("%s was already submitted as job run %s", source.uri, existing["job_run_id"])
                return self._run_from(existing, already=True)
            record = existing or record  # claimed earlier, submission not recorded: submit (the token dedupes)
        request = self._request_for(source, table)
        try:
            started = self._emr.start_job_run(**request)
        except (ClientError, BotoCoreError) as exc:
            self._release(key, record)
            raise InfrastructureError(f"EMR Serverless refused the job for {source.uri} into {table} "
                                      f"(application {self._application_id}): {exc}") from exc
        record |= {"job_run_id": started["jobRunId"], "job_run_arn": started.get("arn"), "submitted_at": _now(),
                   "state": "SUBMITTED"}
        self._write(key, record)
        return self._run_from(record, already=False)

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        prefix = f"{RECORD_PREFIX}/{table.qualified}/" if table else f"{RECORD_PREFIX}/"
        found = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket,
                                                                           Prefix=prefix):
                for item in page.get("Contents", []):
                    record = self._read(item["Key"])
                    if record is not None and record.get("job_run_id"):
                        found.append(self._run_from(record, already=False, refresh=True))
        except (ClientError, BotoCoreError) as exc:
            raise InfrastructureError(f"listing the EMR job records in s3://{self._bucket}/{prefix}: "
                                      f"{exc}") from exc
        return sorted(found, key=lambda r: r.submitted_at, reverse=True)

    # --- the record ----------------------------------------------------------------------------------

    def _claim(self, key: str, record: dict[str, Any]) -> bool:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps(record).encode(),
                                IfNoneMatch="*", ContentType="application/json")
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise InfrastructureError(f"recording the EMR submission at s3://{self._bucket}/{key}: "
                                      f"{exc}") from exc
        except BotoCoreError as exc:
            raise InfrastructureError(f"recording the EMR submission at s3://{self._bucket}/{key}: {exc}") from exc

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise InfrastructureError(f"reading s3://{self._bucket}/{key}: {exc}") from exc
        except BotoCoreError as exc:
            raise InfrastructureError(f"reading s3://{self._bucket}/{key}: {exc}") from exc
        value = json.loads(body)
        return value if isinstance(value, dict) else None

    def _write(self, key: str, record: dict[str, Any]) -> None:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps(record).encode(),
                                ContentType="application/json")
        except (ClientError, BotoCoreError) as exc:
            raise InfrastructureError(f"recording the EMR submission at s3://{self._bucket}/{key}: {exc}") from exc

    def _release(self, key: str, record: dict[str, Any]) -> None:
        """The submission failed: drop the claim so the retried event submits again."""
        if not record.get("job_run_id"):
            try:
                self._s3.delete_object(Bucket=self._bucket, Key=key)
            except (ClientError, BotoCoreError) as exc:
                log.warning("the claim s3://%s/%s could not be released: %s", self._bucket, key, exc)

    def _run_from(self, record: dict[str, Any], *, already: bool, refresh: bool = False) -> JobRun:
        state = str(record.get("final_state") or record.get("state") or "SUBMITTED")
        if refresh and not record.get("final_state"):
            try:
                run = self._emr.get_job_run(applicationId=record["application_id"], jobRunId=record["job_run_id"])
                state = str(run["jobRun"]["state"])
            except (ClientError, BotoCoreError) as exc:
                log.warning("cannot read the state of job run %s: %s", record["job_run_id"], exc)
        source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]))
        return JobRun(job_run_id=str(record["job_run_id"]), application_id=str(record["application_id"]),
                      source=source, table=str(record["table"]), state=state,
                      submitted_at=str(record.get("submitted_at") or record.get("claimed_at")),
                      already_submitted=already, outcome=record.get("outcome"), branch=record.get("branch"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")  # runs sort newest first by it, even within a second

