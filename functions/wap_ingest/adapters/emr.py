"""EmrServerlessJobs: the LargeFileJobs port on EMR Serverless (boto3 `emr-serverless`).

A large file becomes one job run whose entry point (wap_ingest/entrypoints/emr_job.py, uploaded by
`make emr-artifacts`) runs the same pipeline in the cluster. At most once per object version, twice over:
- a record in the lake bucket (`wap-emr/<table>/<digest>.json`), created with If-None-Match so only one
  delivery of the event submits, and updated with the job run id (what `wap branches`/`wap history` show);
- a client token derived from the object version and the attempt, so a retried submission after a crash between
  the two steps is deduplicated by EMR itself.
A run that died on the infrastructure (FAILED or CANCELLED: driver lost, out of memory, timeout) recorded no
outcome: the next delivery of the event finds its state with `get_job_run`, submits the file again (attempt n+1,
a new client token; the record keeps the attempt count and the earlier runs) and alerts through the Notifier,
up to `max_attempts` runs; then it raises, with the fix, and the event ends in the dead-letter queue.
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

from wap_ingest.core.alerts import Alert, plain_text
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.job_failures import (
    FAILED_STATES,
    FailedRun,
    alert_for_resubmission,
    exhausted_message,
    run_log_for,
)
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs, Notifier

from .aws_errors import EMR_SERVERLESS, S3, Failure, aws_error, failure_of

log = logging.getLogger(__name__)

RECORD_PREFIX = "wap-emr"
RequestFor = Callable[[SourceObject, TableRef, int], dict[str, Any]]  # (object version, table, attempt) -> request
_RUN_KEYS = ("job_run_id", "job_run_arn", "submitted_at", "state", "final_state", "outcome", "branch", "rows",
             "message", "finished_at")  # what belongs to one run, moved to `previous_runs` on a resubmission


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
                 request_for: RequestFor, max_attempts: int = 3, notifier: Notifier | None = None) -> None:
        """`request_for` makes the `start_job_run` arguments for one object version and attempt
        (wap_ingest.emr_request); `notifier` hears of failed runs (None: the log)."""
        self._emr, self._s3, self._bucket = emr_client, s3_client, lake_bucket
        self._application_id, self._request_for = application_id, request_for
        self._max_attempts, self._notifier = max_attempts, notifier

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        key = record_key(table, source)
        record: dict[str, Any] = {"object": source.uri, "bucket": source.bucket, "key": source.key,
                                  "identity": source.identity, "table": table.qualified, "size": source.size,
                                  "etag": source.etag, "version_id": source.version_id,
                                  "application_id": self._application_id, "claimed_at": _now(), "attempt": 1}
        failed: FailedRun | None = None
        if not self._claim(key, record):
            existing = self._read(key)
            if existing is not None and existing.get("job_run_id"):
                failed = self._failure_of(existing)
                if failed is None:
                    log.info("%s was already submitted as job run %s", source.uri, existing["job_run_id"])
                    return self._run_from(existing, already=True)
                record = self._next_attempt(key, existing, failed, source, table)
            else:
                record = existing or record  # claimed earlier, submission not recorded: submit (the token dedupes)
        attempt = int(record.get("attempt") or 1)
        request = self._request_for(source, table, attempt)
        try:
            started = self._emr.start_job_run(**request)
        except (ClientError, BotoCoreError) as exc:
            self._release(key, record)
            raise aws_error(exc, service=EMR_SERVERLESS, doing=f"submitting {source.uri} into {table} (attempt "
                            f"{attempt}) to", resource=f"application {self._application_id}",
                            setting="WAP_EMR_APPLICATION_ID and WAP_EMR_EXECUTION_ROLE_ARN") from exc
        record |= {"job_run_id": started["jobRunId"], "job_run_arn": started.get("arn"), "submitted_at": _now(),
                   "state": "SUBMITTED", "log_uri": _log_uri(request)}
        self._write(key, record)
        if failed is not None:
            self._alert(alert_for_resubmission(source, table.qualified, failed, attempt=attempt,
                                               max_attempts=self._max_attempts, new_run_id=str(started["jobRunId"])))
        return self._run_from(record, already=False)

    # --- a run that died -----------------------------------------------------------------------------

    def run_ended(self, application_id: str, job_run_id: str) -> JobRun | None:
        """EMR says a run ended (its state-change event): if it is the recorded run of a large file and it failed,
        resubmit it now (with the alert, within the cap: `submit` decides), instead of waiting for a redelivery.
        None when there is nothing to do (another application's run, a superseded run, or one that succeeded)."""
        if application_id != self._application_id:
            return None
        try:
            tags = self._emr.get_job_run(applicationId=application_id, jobRunId=job_run_id)["jobRun"].get("tags", {})
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=EMR_SERVERLESS, doing="reading",
                            resource=f"job run {job_run_id} (application {application_id})") from exc
        table, digest = tags.get("wap:table"), tags.get("wap:object-digest")
        if not table or not digest:
            return None
        record = self._read(f"{RECORD_PREFIX}/{table}/{digest}.json")
        if record is None or record.get("job_run_id") != job_run_id:
            return None
        source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]), size=record.get("size"),
                              etag=record.get("etag"), version_id=record.get("version_id"))
        if source.identity != record.get("identity"):  # a record written before versions were kept in it
            log.warning("job run %s ended; its record has no object version: its redelivery resubmits it", job_run_id)
            return None
        namespace, _, name = str(record["table"]).partition(".")
        run = self.submit(source, TableRef(namespace, name))  # reads the run's state: resubmits only a failed one
        return None if run.already_submitted else run

    def _failure_of(self, record: dict[str, Any]) -> FailedRun | None:
        """The recorded run, if it ended without success (the engine's state, read now); None while it runs or
        when it succeeded (then this delivery is a duplicate)."""
        app, run_id = str(record["application_id"]), str(record["job_run_id"])
        try:
            run = self._emr.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is not Failure.NO_RESOURCE:
                raise aws_error(exc, service=EMR_SERVERLESS, doing="reading the state of",
                                resource=f"job run {run_id} (application {app})") from exc
            run = {"state": "CANCELLED", "stateDetails": f"the job run no longer exists ({exc})"}
        state = str(run.get("state"))
        if state not in FAILED_STATES:
            return None
        return FailedRun(run_id, state, str(run.get("stateDetails") or ""),
                         run_log_for(record.get("log_uri"), app, run_id))

    def _next_attempt(self, key: str, record: dict[str, Any], failed: FailedRun, source: SourceObject,
                      table: TableRef) -> dict[str, Any]:
        """The record for the next run, or the error (with the fix) when the allowed runs are used up."""
        earlier = [*record.get("previous_runs", []), {
            "job_run_id": failed.job_run_id, "state": failed.state, "state_details": failed.details,
            "log": failed.log, "submitted_at": record.get("submitted_at"), "attempt": record.get("attempt") or 1}]
        attempt = int(record.get("attempt") or 1)
        if attempt >= self._max_attempts:
            runs = [FailedRun(str(r["job_run_id"]), str(r["state"]), str(r.get("state_details") or ""),
                              r.get("log")) for r in earlier]
            raise InfrastructureError(exhausted_message(source, table.qualified, runs,
                                                        max_attempts=self._max_attempts,
                                                        record_uri=f"s3://{self._bucket}/{key}"))
        log.warning("job run %s for %s %s (%s): resubmitting, attempt %d of %d", failed.job_run_id, source.uri,
                    failed.state, failed.details, attempt + 1, self._max_attempts)
        kept = {k: v for k, v in record.items() if k not in _RUN_KEYS}
        return kept | {"attempt": attempt + 1, "previous_runs": earlier}

    def _alert(self, alert: Alert) -> None:
        if self._notifier is None:
            log.warning("%s", plain_text(alert.text))
            return
        try:
            self._notifier.notify(alert)
        except Exception:  # an alert outage never changes the submission
            log.exception("the alert about a failed job run could not be sent")

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
            raise aws_error(exc, service=S3, doing="listing the EMR job records in",
                            resource=f"s3://{self._bucket}/{prefix}", setting="LAKE_BUCKET") from exc
        return sorted(found, key=lambda r: r.submitted_at, reverse=True)

    # --- the record ----------------------------------------------------------------------------------

    def _claim(self, key: str, record: dict[str, Any]) -> bool:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps(record).encode(),
                                IfNoneMatch="*", ContentType="application/json")
            return True
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.PRECONDITION:  # If-None-Match: another delivery claimed it first
                return False
            raise self._record_error(exc, "claiming the EMR submission at", key) from exc

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.MISSING:
                return None
            raise self._record_error(exc, "reading the EMR submission record", key) from exc
        value = json.loads(body)
        return value if isinstance(value, dict) else None

    def _write(self, key: str, record: dict[str, Any]) -> None:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=json.dumps(record).encode(),
                                ContentType="application/json")
        except (ClientError, BotoCoreError) as exc:
            raise self._record_error(exc, "recording the EMR submission at", key) from exc

    def _record_error(self, exc: ClientError | BotoCoreError, doing: str, key: str) -> WapError:
        return aws_error(exc, service=S3, doing=doing, resource=f"s3://{self._bucket}/{key}", setting="LAKE_BUCKET")

    def _release(self, key: str, record: dict[str, Any]) -> None:
        """The first submission failed: drop the claim so the retried event submits again. (A resubmission leaves
        the record as it was: the failed run is still there for the next delivery to find.)"""
        if not record.get("job_run_id") and not record.get("previous_runs"):
            try:
                self._s3.delete_object(Bucket=self._bucket, Key=key)
            except (ClientError, BotoCoreError) as exc:
                log.warning("the claim could not be released (the retried event finds and submits it): %s",
                            self._record_error(exc, "releasing the claim", key))

    def _run_from(self, record: dict[str, Any], *, already: bool, refresh: bool = False) -> JobRun:
        state = str(record.get("final_state") or record.get("state") or "SUBMITTED")
        if refresh and not record.get("final_state"):
            try:
                run = self._emr.get_job_run(applicationId=record["application_id"], jobRunId=record["job_run_id"])
                state = str(run["jobRun"]["state"])
            except (ClientError, BotoCoreError) as exc:
                log.warning("the state shown is the recorded one: %s", aws_error(
                    exc, service=EMR_SERVERLESS, doing="reading the state of",
                    resource=f"job run {record['job_run_id']} (application {record['application_id']})"))
        source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]))
        return JobRun(job_run_id=str(record["job_run_id"]), application_id=str(record["application_id"]),
                      source=source, table=str(record["table"]), state=state,
                      submitted_at=str(record.get("submitted_at") or record.get("claimed_at")),
                      already_submitted=already, outcome=record.get("outcome"), branch=record.get("branch"))


def _log_uri(request: dict[str, Any]) -> str | None:
    monitoring = request.get("configurationOverrides", {}).get("monitoringConfiguration", {})
    uri = monitoring.get("s3MonitoringConfiguration", {}).get("logUri")
    return str(uri) if uri else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")  # runs sort newest first by it, even within a second

