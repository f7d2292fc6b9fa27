"""A large file's job run that died on the infrastructure (the driver lost, out of memory, the execution timeout, a
cancellation, a run stuck past its limit): the job could not record an outcome nor alert, so whichever notices it
first (EMR's state-change event, a redelivery of the file's event, the scheduled sweep: adapters/aws/emr.py) resubmits
the file (a new run) and tells the operator; after `max_attempts` runs it stops and says how to go on. And a job that
refused to run because its audits file is not the function's (`suite_mismatch_message`)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .alerts import Alert, AlertKind, mrkdwn_escape
from .errors import InfrastructureError
from .models import SourceObject

FAILED_STATES = frozenset({"FAILED", "CANCELLED"})  # EMR Serverless job run states that end without success


class JobRunsExhaustedError(InfrastructureError):
    """The last allowed run of a large file failed: not resubmitted again; the message has the fix."""


@dataclass(frozen=True)
class FailedRun:
    job_run_id: str
    state: str  # FAILED or CANCELLED
    details: str  # EMR's stateDetails: the reason, e.g. "Job failed, please check complete logs ..."
    log: str | None = None  # s3:// folder of the run's logs (its driver's stderr is SPARK_DRIVER/stderr.gz)

    @property
    def driver_log(self) -> str | None:
        return f"{self.log}/SPARK_DRIVER/stderr.gz" if self.log else None


def run_log_for(log_uri: str | None, application_id: str, job_run_id: str) -> str | None:
    """Where EMR Serverless writes a run's logs under the request's `logUri`."""
    return f"{log_uri.rstrip('/')}/applications/{application_id}/jobs/{job_run_id}" if log_uri else None


def _log_command(failed: FailedRun) -> tuple[tuple[str, str], ...]:
    log = failed.driver_log
    return (("Driver log of the failed run", f"aws s3 cp {shlex.quote(log)} - | gunzip | tail -50"),) if log else ()


def alert_for_resubmission(source: SourceObject, table: str, failed: FailedRun, *, attempt: int, max_attempts: int,
                           new_run_id: str, swept: bool = False) -> Alert:
    """The run `failed` ended without an outcome; the file was submitted again as `new_run_id` (run `attempt`).
    `swept`: found by the scheduled sweep (no event resubmitted it)."""
    e = mrkdwn_escape
    found = (" The scheduled sweep found it: no state-change event had resubmitted it (check the EventBridge rule and "
             "the function's async invocation errors).") if swept else ""
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=f":rotating_light: EMR job run {e(failed.job_run_id)} {e(failed.state)} for {e(source.uri)}: "
              f"resubmitted (attempt {attempt} of {max_attempts})",
        summary="Not a data problem: the job died on the infrastructure (driver lost, out of memory, timeout or "
                "cancelled) before it recorded an outcome; main is untouched. The file runs again as job run "
                f"{e(new_run_id)}. If the cause stays (memory: the application's maximumCapacity and the job's "
                "Spark settings; network: docs/deploy.md), the next run fails too: read the driver log." + found,
        fields=(("Object", e(source.uri)), ("Table", e(table)), ("Failed job run", e(failed.job_run_id)),
                ("State", e(failed.state)), ("New job run", e(new_run_id)), ("Attempt", f"{attempt}/{max_attempts}")),
        details=(e(failed.details or "(no state details)"),),
        commands=_log_command(failed),
    )


def exhausted_message(source: SourceObject, table: str, runs: Sequence[FailedRun], *, max_attempts: int,
                      record_uri: str) -> str:
    """The error when the last allowed run failed too: the message of the alert and of `wap ingest`'s output."""
    last = runs[-1]
    listed = ", ".join(f"{r.job_run_id} ({r.state})" for r in runs)
    log = f" Its driver log: {last.driver_log}." if last.driver_log else ""
    return (f"EMR job runs for {source.uri} into {table} failed {len(runs)} time(s), the most allowed "
            f"(WAP_EMR_MAX_ATTEMPTS={max_attempts}): {listed}; not resubmitted again. Last: {last.state}: "
            f"{last.details or '(no state details)'}.{log} Fix the cause (memory: the application's maximumCapacity "
            f"and the job's Spark settings; network: docs/deploy.md, 'Network for the large-file jobs'), then "
            f"delete the record ({record_uri}) and resend the event (`wap dlq redrive` once it is in the dead-letter "
            f"queue, or `wap ingest {source.uri} --table {table}`), or re-upload the file (a new version starts "
            "with new attempts).")


def alert_for_exhausted(job_run_id: str, message: str) -> Alert:
    """A run ended and the file has used its allowed runs (or could not be resubmitted): an operator acts."""
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=f":rotating_light: EMR job run {mrkdwn_escape(job_run_id)} ended and was not resubmitted",
        summary="Not a data problem: main is untouched. The file waits for an operator; the fix follows.",
        fields=(("Job run", mrkdwn_escape(job_run_id)),),
        details=(mrkdwn_escape(message),),
    )



def suite_mismatch_message(what: str, *, job_run_id: str, expected: str, found: str, audits_file: str,
                           again: str) -> str:
    """The job's audits file is not the one the function audits with (`expected`: the digest its request carries).
    `what`: the job's work (`s3://b/k into ns.t`, `the maintenance of ns.t`); `again`: how it runs once fixed."""
    return (f"EMR job run {job_run_id} refused {what} before doing anything: the audits file it loaded "
            f"({audits_file}, sha256 {found}) is not the function's (sha256 {expected}), so it would audit with other "
            f"rules than the function's. Nothing was read or written; main is untouched. Fix: `make emr-artifacts` "
            f"(uploads the function's audits.yml with the job's artefacts to WAP_EMR_ARTIFACTS); then {again}.")


def alert_for_suite_mismatch(what: str, *, job_run_id: str, expected: str, found: str, audits_file: str,
                             again: str) -> Alert:
    e = mrkdwn_escape
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=f":rotating_light: EMR job run {e(job_run_id)} refused to run: its audits.yml is not the function's",
        summary="Not a data problem: the job's artefacts carry another audits file than the function's, so the job "
                f"stopped before reading anything (main is untouched). Upload the function's with `make "
                f"emr-artifacts`; then {e(again)}.",
        fields=(("Job", e(what)), ("Job run", e(job_run_id)), ("Function's audits (sha256)", e(expected)),
                ("Job's audits (sha256)", e(found))),
        details=(e(suite_mismatch_message(what, job_run_id=job_run_id, expected=expected, found=found,
                                          audits_file=audits_file, again=again)),),
        commands=(("Upload the function's audits file with the job's artefacts", "make emr-artifacts"),),
    )
