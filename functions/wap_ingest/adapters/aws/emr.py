"""EmrServerlessJobs: the LargeFileJobs port on EMR Serverless (boto3 `emr-serverless`).

A large file becomes one job run whose entry point (wap_ingest/entrypoints/emr_job.py, uploaded by
`make emr-artifacts`) runs the same pipeline in the cluster. At most once per object version, twice over:
- a record in the lake bucket (`wap-emr/<table>/<digest>.json`, adapters/aws/emr_records.py), created with If-None-Match
  so only one delivery of the event submits, and changed only with If-Match on the ETag read (so of two writers that
  read the same record, one wins and the other reads it again);
- a client token derived from the object version and the attempt, so a retried submission after a crash between
  the two steps is deduplicated by EMR itself.
A run that died on the infrastructure (FAILED or CANCELLED: driver lost, out of memory, timeout), or that is still
going long past its limit, recorded no outcome. Three paths notice it and take the same decision from the record
(core/job_sweep.py): EMR's state-change event (`run_ended`), a redelivery of the file's event (`submit`), and the
scheduled sweep (`sweep`), so recovery never rests on one event. The first to claim the next attempt in the record
(a conditional write) submits the file again (attempt n+1, a new client token; the record keeps the earlier runs)
and alerts; the others find the new run. After `max_attempts` runs the record is marked exhausted, once, and the
one that marked it alerts (the event path raises, with the fix; the sweep sends the alert).
The request carries no secret: the job reads the Slack token and the Nessie client secret from their
parameters (SSM / Secrets Manager) at start, as the function does.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.emr_records import RECORD_PREFIX, EmrRecords, Stored
from wap_ingest.adapters.aws.errors import EMR_SERVERLESS, Failure, aws_error, failure_of
from wap_ingest.core.alerts import Alert, plain_text
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.job_failures import (
    FailedRun,
    JobRunsExhaustedError,
    alert_for_exhausted,
    alert_for_resubmission,
    exhausted_message,
    run_log_for,
)
from wap_ingest.core.job_sweep import (
    Recovered,
    SweepReport,
    Verdict,
    engine_verdict,
    overdue_details,
    recorded_verdict,
)
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs, Notifier

log = logging.getLogger(__name__)

__all__ = ["RECORD_PREFIX", "EmrServerlessJobs", "digest_of", "parse_submit_parameters", "record_key"]

RequestFor = Callable[[SourceObject, TableRef, int], dict[str, Any]]  # (object version, table, attempt) -> request
_RUN_KEYS = ("job_run_id", "job_run_arn", "submitted_at", "state", "final_state", "outcome", "branch", "rows",
             "message", "finished_at", "timeout_minutes", "refused")  # one run's: dropped on a resubmission
_RACES = 5  # conditional writes lost in a row before giving up (the next event or sweep settles it)


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


@dataclass(frozen=True)
class _Step:
    """What looking at a record came to."""

    run: JobRun | None = None  # the run the record names now (the one just started, or the existing one)
    again: bool = False  # a conditional write was lost: read the record again
    recovered: Recovered | None = None  # a failed run resubmitted (new_run) or, just now, marked exhausted
    exhausted: str | None = None  # the record is exhausted: the message with the fix
    marked: bool = False  # this call marked it exhausted (it alerts; the others do not)


class EmrServerlessJobs(LargeFileJobs):
    def __init__(self, emr_client: Any, s3_client: Any, *, lake_bucket: str, application_id: str,
                 request_for: RequestFor, max_attempts: int = 3, notifier: Notifier | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        """`request_for` makes the `start_job_run` arguments for one object version and attempt
        (wap_ingest.bootstrap.emr_request); `notifier` hears of failed runs (None: the log)."""
        self._emr, self._records = emr_client, EmrRecords(s3_client, lake_bucket)
        self._application_id, self._request_for = application_id, request_for
        self._max_attempts, self._notifier = max_attempts, notifier
        self._clock = clock or (lambda: datetime.now(UTC))

    # --- the three paths -----------------------------------------------------------------------------

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        """A delivery of the file's event: claim and start the first run, or settle the recorded one (a failed
        run is resubmitted; an exhausted one raises, with the fix)."""
        key = record_key(table, source)
        fresh: dict[str, Any] = {"object": source.uri, "bucket": source.bucket, "key": source.key,
                                 "identity": source.identity, "table": table.qualified, "size": source.size,
                                 "etag": source.etag, "version_id": source.version_id,
                                 "application_id": self._application_id, "claimed_at": _iso(self._clock()),
                                 "attempt": 1}
        stored: Stored | None = None
        for _ in range(_RACES):
            if stored is None:  # no record (yet, or any more): claim the version
                claimed = self._records.create(key, fresh)
                step = _Step(again=True) if claimed is None else self._start(claimed, source, table)
            else:
                step = self._settle(stored, source, table, by="delivery")
            if step.exhausted is not None:
                raise JobRunsExhaustedError(step.exhausted)
            if not step.again and step.run is not None:
                return step.run
            stored = self._records.read(key)
        raise InfrastructureError(f"the EMR record of {source.uri} ({self._records.uri(key)}) kept changing while "
                                  "this delivery read it; the retried event settles it.")

    def run_ended(self, application_id: str, job_run_id: str) -> JobRun | None:
        """EMR says a run ended (its state-change event): if it is the recorded run of a large file and it failed,
        resubmit it now (the new run), or raise when this call found its last allowed run failed. None when there is
        nothing to do (another application's run, a superseded or successful run, one already handled)."""
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
        for _ in range(_RACES):
            stored = self._records.read(f"{RECORD_PREFIX}/{table}/{digest}.json")
            if stored is None or stored.body.get("job_run_id") != job_run_id:
                return None  # not ours, or superseded: the path that resubmitted it alerted
            found = _source_and_table(stored.body)
            if found is None:
                log.warning("job run %s ended; its record has no object version: the sweep skips it too", job_run_id)
                return None
            step = self._settle(stored, *found, by="event")
            if step.marked and step.exhausted is not None:
                raise JobRunsExhaustedError(step.exhausted)
            if not step.again:
                return step.run if step.recovered is not None else None
        return None  # it keeps changing: others are at it

    def sweep(self) -> SweepReport:
        """The schedule's look at every record: a run that failed or was cancelled (whether or not its event came),
        or that is still going long past its limit, is resubmitted (within the allowed attempts, with the
        resubmission alert) or, past them, marked exhausted and alerted once."""
        checked, errors = 0, []
        resubmitted: list[Recovered] = []
        exhausted: list[Recovered] = []
        for key in self._records.listed():
            checked += 1
            try:
                recovered = self._sweep_one(key)
            except Exception as exc:  # this record's own failure (an outage, a malformed record): the others go on
                log.error("the sweep could not settle %s: %s", self._records.uri(key), exc,
                          exc_info=not isinstance(exc, WapError))
                errors.append(f"{self._records.uri(key)}: {type(exc).__name__}: {exc}")
                continue
            if recovered is not None:
                (resubmitted if recovered.new_run else exhausted).append(recovered)
        report = SweepReport(checked, tuple(resubmitted), tuple(exhausted), tuple(errors))
        log.info("EMR sweep: %d record(s), %d resubmitted, %d exhausted, %d error(s)", checked, len(resubmitted),
                 len(exhausted), len(errors), extra={"emr_sweep": report.to_dict()})
        return report

    def _sweep_one(self, key: str) -> Recovered | None:
        for _ in range(_RACES):
            stored = self._records.read(key)
            found = None if stored is None else _source_and_table(stored.body)
            if stored is None or found is None:
                return None  # gone (an operator deleted it), or a record without its object version
            step = self._settle(stored, *found, by="sweep")
            if step.again:
                continue
            if step.marked and step.exhausted is not None and step.recovered is not None:
                self._alert(alert_for_exhausted(step.recovered.failed_run, step.exhausted))
            return step.recovered
        raise InfrastructureError("the record kept changing while the sweep read it; the next sweep settles it")

    # --- one decision for all three ------------------------------------------------------------------

    def _settle(self, stored: Stored, source: SourceObject, table: TableRef, *, by: str) -> _Step:
        """`by`: the path looking (`event`: EMR's state change, `delivery`: the file's event, `sweep`)."""
        record, now = stored.body, self._clock()
        verdict, failed = recorded_verdict(record, now), None
        if verdict is Verdict.REFUSED and by == "event":  # its artefacts wait for `make emr-artifacts`: the sweep
            return _Step(run=self._run_from(record, already=True))  # (or a redelivery) resubmits it, not at once
        if verdict in (Verdict.FAILED, Verdict.REFUSED):  # the job itself recorded its failure (and exited 1)
            failed = self._failed(record, "FAILED", str(record.get("message") or "the job recorded a failure"))
        elif verdict is None:
            state, details = self._engine_state(record)
            verdict = engine_verdict(record, state, now)
            if verdict is Verdict.FAILED:
                failed = self._failed(record, state, details)
            elif verdict is Verdict.OVERDUE:
                self._cancel(record)
                failed = self._failed(record, "CANCELLED", overdue_details(record, state, now))
        if verdict is Verdict.EXHAUSTED:
            return _Step(run=self._run_from(record, already=True), exhausted=str(record.get("exhausted_message")))
        if verdict in (Verdict.DONE, Verdict.LIVE) or (verdict is Verdict.UNSUBMITTED and by == "sweep"):
            return _Step(run=self._run_from(record, already=True))
        if failed is None:  # claimed and never submitted (a delivery's start in flight, or one that died)
            return self._start(stored, source, table)
        return self._resubmit(stored, source, table, failed, by=by)

    def _resubmit(self, stored: Stored, source: SourceObject, table: TableRef, failed: FailedRun, *,
                  by: str) -> _Step:
        record, now = stored.body, _iso(self._clock())
        attempt = int(record.get("attempt") or 1)
        earlier = [*record.get("previous_runs", []), {
            "job_run_id": failed.job_run_id, "state": failed.state, "state_details": failed.details,
            "log": failed.log, "submitted_at": record.get("submitted_at"), "attempt": attempt,
            "outcome": record.get("outcome"), "message": record.get("message"), "refused": record.get("refused")}]
        if attempt >= self._max_attempts:
            runs = [FailedRun(str(r["job_run_id"]), str(r["state"]), str(r.get("state_details") or ""), r.get("log"))
                    for r in earlier]
            message = exhausted_message(source, table.qualified, runs, max_attempts=self._max_attempts,
                                        record_uri=self._records.uri(stored.key))
            marked = self._records.replace(stored, record | {
                "exhausted_at": now, "state": failed.state, "state_details": failed.details,
                "exhausted_message": message})
            if marked is None:
                return _Step(again=True)
            log.error("%s", message)
            return _Step(run=self._run_from(marked.body, already=True), exhausted=message, marked=True,
                         recovered=Recovered(source.uri, table.qualified, failed.job_run_id, failed.state, attempt))
        kept = {k: v for k, v in record.items() if k not in _RUN_KEYS}
        claimed = self._records.replace(stored, kept | {
            "attempt": attempt + 1, "previous_runs": earlier, "resubmitted_at": now,
            "resubmitted_by": by})
        if claimed is None:
            return _Step(again=True)  # another path claimed this attempt first: it resubmits
        log.warning("job run %s for %s %s (%s): resubmitting, attempt %d of %d", failed.job_run_id, source.uri,
                    failed.state, failed.details, attempt + 1, self._max_attempts)
        step = self._start(claimed, source, table, restore=stored.body)
        if step.run is not None and not step.again:
            self._alert(alert_for_resubmission(source, table.qualified, failed, attempt=attempt + 1,
                                               max_attempts=self._max_attempts, new_run_id=step.run.job_run_id,
                                               swept=by == "sweep"))
            return _Step(run=step.run, recovered=Recovered(source.uri, table.qualified, failed.job_run_id,
                                                           failed.state, attempt + 1, step.run.job_run_id))
        return step

    def _start(self, claimed: Stored, source: SourceObject, table: TableRef,
               restore: dict[str, Any] | None = None) -> _Step:
        """Start the run of the claimed attempt and record it. `restore`: the record before the claim, put back
        when EMR refuses (the failed run stays for the next event or sweep)."""
        record = claimed.body
        attempt = int(record.get("attempt") or 1)
        request = self._request_for(source, table, attempt)
        try:
            started = self._emr.start_job_run(**request)
        except (ClientError, BotoCoreError) as exc:
            self._release(claimed, restore)
            raise aws_error(exc, service=EMR_SERVERLESS, doing=f"submitting {source.uri} into {table} (attempt "
                            f"{attempt}) to", resource=f"application {self._application_id}",
                            setting="WAP_EMR_APPLICATION_ID and WAP_EMR_EXECUTION_ROLE_ARN") from exc
        run_id = str(started["jobRunId"])
        written = self._records.replace(claimed, record | {
            "job_run_id": run_id, "job_run_arn": started.get("arn"), "submitted_at": _iso(self._clock()),
            "state": "SUBMITTED", "log_uri": _log_uri(request), "timeout_minutes": request.get(
                "executionTimeoutMinutes")})
        if written is not None:
            return _Step(run=self._run_from(written.body, already=False))
        now = self._records.read(claimed.key)  # the same attempt started elsewhere meanwhile (EMR dedupes its token)
        if now is not None and now.body.get("job_run_id") == run_id:
            return _Step(run=self._run_from(now.body, already=True))
        log.warning("job run %s duplicates the run recorded for %s: cancelling it", run_id, source.uri)
        self._cancel({"application_id": self._application_id, "job_run_id": run_id})
        return _Step(again=True)

    # --- the engine ----------------------------------------------------------------------------------

    def _engine_state(self, record: dict[str, Any]) -> tuple[str, str]:
        app, run_id = str(record["application_id"]), str(record["job_run_id"])
        try:
            run = self._emr.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is not Failure.NO_RESOURCE:
                raise aws_error(exc, service=EMR_SERVERLESS, doing="reading the state of",
                                resource=f"job run {run_id} (application {app})") from exc
            return "CANCELLED", f"the job run no longer exists ({exc})"
        return str(run.get("state")), str(run.get("stateDetails") or "")

    def _failed(self, record: dict[str, Any], state: str, details: str) -> FailedRun:
        app, run_id = str(record["application_id"]), str(record["job_run_id"])
        return FailedRun(run_id, state, details, run_log_for(record.get("log_uri"), app, run_id))

    def _cancel(self, record: dict[str, Any]) -> None:
        """Cancel a run that is stuck past its limit (or a duplicate), so it cannot run beside its resubmission."""
        try:
            self._emr.cancel_job_run(applicationId=record["application_id"], jobRunId=record["job_run_id"])
        except (ClientError, BotoCoreError) as exc:  # it ended meanwhile, or EMR refuses: the job dedupes on main
            log.warning("job run %s could not be cancelled: %s", record["job_run_id"], exc)

    def _alert(self, alert: Alert) -> None:
        if self._notifier is None:
            log.warning("%s", plain_text(alert.text))
            return
        try:
            self._notifier.notify(alert)
        except Exception:  # an alert outage never changes the submission
            log.exception("the alert about a failed job run could not be sent")

    def _release(self, claimed: Stored, restore: dict[str, Any] | None) -> None:
        """EMR refused the start: a first claim is dropped (the retried event claims again); a resubmission's claim
        is put back as it was (the failed run stays for the next event or sweep); anything else stays (stale, the
        sweep submits it)."""
        try:
            if restore is not None:
                self._records.replace(claimed, restore)
            elif int(claimed.body.get("attempt") or 1) == 1 and not claimed.body.get("previous_runs"):
                self._records.delete(claimed.key)
        except WapError as exc:
            log.warning("the claim could not be released (the next event or sweep finds it): %s", exc)

    # --- what `wap branches` shows -------------------------------------------------------------------

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        prefix = f"{RECORD_PREFIX}/{table.qualified}/" if table else f"{RECORD_PREFIX}/"
        found = []
        for key in self._records.listed(prefix):
            stored = self._records.read(key)
            if stored is not None and stored.body.get("job_run_id"):
                found.append(self._run_from(stored.body, already=False, refresh=True))
        return sorted(found, key=lambda r: r.submitted_at, reverse=True)

    def _run_from(self, record: dict[str, Any], *, already: bool, refresh: bool = False) -> JobRun:
        state = str(record.get("final_state") or record.get("state") or "SUBMITTED")
        if refresh and not record.get("final_state") and not record.get("exhausted_at"):
            try:
                run = self._emr.get_job_run(applicationId=record["application_id"], jobRunId=record["job_run_id"])
                state = str(run["jobRun"]["state"])
            except (ClientError, BotoCoreError) as exc:
                log.warning("the state shown is the recorded one: %s", aws_error(
                    exc, service=EMR_SERVERLESS, doing="reading the state of",
                    resource=f"job run {record['job_run_id']} (application {record['application_id']})"))
        source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]))
        return JobRun(job_run_id=str(record.get("job_run_id") or ""), application_id=str(record["application_id"]),
                      source=source, table=str(record["table"]), state=state,
                      submitted_at=str(record.get("submitted_at") or record.get("claimed_at")),
                      already_submitted=already, outcome=record.get("outcome"), branch=record.get("branch"))


def _source_and_table(record: dict[str, Any]) -> tuple[SourceObject, TableRef] | None:
    """The object version and table a record is about; None for a record written before versions were kept."""
    source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]), size=record.get("size"),
                          etag=record.get("etag"), version_id=record.get("version_id"))
    if source.identity != record.get("identity"):
        return None
    namespace, _, name = str(record["table"]).partition(".")
    return source, TableRef(namespace, name)


def _log_uri(request: dict[str, Any]) -> str | None:
    monitoring = request.get("configurationOverrides", {}).get("monitoringConfiguration", {})
    uri = monitoring.get("s3MonitoringConfiguration", {}).get("logUri")
    return str(uri) if uri else None


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")  # runs sort newest first by it, even within a second
