"""The EMR Serverless job's entry point: the same WAP pipeline for one large file, in the cluster.

    spark-submit [--conf ... from the submission] emr_job.py --bucket B --key K --table NS.T
                 [--size N] [--etag E] [--version-id V] --audits-digest SHA256
    spark-submit [--conf ...] emr_job.py --maintain NS.T --audits-digest SHA256
                 (`wap maintain` of a table above its emr_above_mb)

Submitted by the function (adapters/aws/emr.py) with the object version it was notified of and the digest of the
function's audits file. Before doing anything the job compares that digest with the audits file it loaded (shipped
with its artefacts): on a mismatch it alerts (both digests, and the fix: `make emr-artifacts`), records the refusal
and exits 1, so the run shows FAILED and is resubmitted (by its state-change event or the scheduled sweep) once the
artefacts are fixed, never audited against other rules than the function's.
Otherwise it runs branch, append, audit, merge-or-reject and the alert exactly as the function does (bootstrap's
Service with the submitted Spark session), records the outcome in the submission record in the lake bucket (what
`wap branches` shows; a conditional write, as every change of that record), and exits 0 for every outcome of the
pipeline (published, rejected, invalid, duplicate: the job did its work and the operator was told), 1 for an
infrastructure failure (the job run shows FAILED; it is resubmitted, up to WAP_EMR_MAX_ATTEMPTS runs).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from wap_ingest.adapters.aws import EmrRecords, record_key
from wap_ingest.bootstrap import build_service, notifier_for
from wap_ingest.bootstrap.builders import s3_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import audits_digest
from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.ingest import Delivery
from wap_ingest.core.job_failures import alert_for_suite_mismatch, suite_mismatch_message
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.naming import table_ref_from
from wap_ingest.core.pipeline import is_manifest

log = logging.getLogger("wap_ingest.emr_job")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="WAP for one large file, as an EMR Serverless job")
    parser.add_argument("--maintain", metavar="NS.T", help="maintain this table (core.pipeline.maintain) instead")
    parser.add_argument("--bucket")
    parser.add_argument("--key")
    parser.add_argument("--table", help="<namespace>.<table>, routed by the function")
    parser.add_argument("--size", type=int)
    parser.add_argument("--etag")
    parser.add_argument("--version-id")
    parser.add_argument("--audits-digest", help="sha256 of the function's audits file (the job's must match)")
    args = parser.parse_args(argv)
    if not args.maintain and not (args.bucket and args.key and args.table):
        parser.error("--bucket, --key and --table are required (or --maintain NS.T)")
    return args


def _job_run_id() -> str:
    return os.environ.get("EMR_SERVERLESS_JOB_RUN_ID") or os.environ.get("WAP_EMR_JOB_RUN_ID") or "local"


def _refusal(settings: Settings, expected: str | None, what: str, again: str) -> str | None:
    """Why this job must not run (its audits file is not the function's), alerted; None when it is the same."""
    try:
        found = audits_digest(settings.audits_file)
    except ConfigError as exc:
        found = f"(unreadable: {exc})"
    if found == expected:
        return None
    expected = expected or "(none: the request carries no --audits-digest; it was sent by an older function)"
    job_run_id = _job_run_id()
    facts = {"what": what, "job_run_id": job_run_id, "expected": expected, "found": found,
             "audits_file": str(settings.audits_file), "again": again}
    message = suite_mismatch_message(**facts)
    log.error("%s", message)
    try:
        notifier_for(settings).notify(alert_for_suite_mismatch(**facts))
    except Exception:  # the refusal stands without its alert; the record and the run's FAILED state tell it too
        log.exception("the alert about the audits file could not be sent")
    return message


def _maintain(name: str, expected_digest: str | None) -> int:
    """The maintenance of one large table, here (never sent to EMR again); 1 if it failed or was refused."""
    settings = Settings.from_env()
    table = table_ref_from(name, default_namespace=settings.namespace, source="--maintain")
    job_run_id = _job_run_id()
    refused = _refusal(settings, expected_digest, f"the maintenance of {table}",
                       f"the next schedule maintains it (at once: `wap maintain {table.qualified}`)")
    if refused is not None:
        print(json.dumps({"job_run_id": job_run_id, "table": table.qualified, "error": refused}), flush=True)
        return 1
    (result,) = build_service(settings, submitted=True).maintain(table, here=True)
    if isinstance(result, WapError):
        print(json.dumps({"job_run_id": job_run_id, "table": table.qualified, "error": str(result)}), flush=True)
        return 1
    print(json.dumps({"job_run_id": job_run_id, **result.to_dict()}, default=str), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='{"ts":"%(asctime)s","level":"%(levelname)s",'
                        '"logger":"%(name)s","message":"%(message)s"}')
    args = _arguments(argv)
    if args.maintain:
        return _maintain(args.maintain, args.audits_digest)
    settings = Settings.from_env()
    source = SourceObject(bucket=args.bucket, key=args.key, size=args.size, etag=args.etag,
                          version_id=args.version_id)
    table = table_ref_from(args.table, default_namespace=settings.namespace, source="--table")
    job_run_id = _job_run_id()
    refused = _refusal(settings, args.audits_digest, f"{source.uri} into {table}",
                       f"the daily sweep resubmits the refused run (at once: `wap ingest {source.uri} --table "
                       f"{table.qualified}`), up to WAP_EMR_MAX_ATTEMPTS runs")
    if refused is not None:
        _record(settings, table, source, {
            "final_state": "FAILED", "outcome": OutcomeStatus.FAILED.value, "message": refused, "branch": None,
            "rows": None, "finished_at": _now(), "refused": "audits"})
        print(json.dumps({"job_run_id": job_run_id, "object": source.uri, "status": "failed", "message": refused}),
              flush=True)
        return 1
    log.info("job %s: WAP for %s into %s", job_run_id, source.uri, table)
    service = build_service(settings, submitted=True)
    delivery = Delivery(correlation_id=f"emr:{job_run_id}:{source.key}")
    try:
        # a manifest runs its multi-table load (its record is kept under `table`, the load's first table)
        outcome = service.ingest(source, table=None if is_manifest(source.key) else table, delivery=delivery)
    except WapError as exc:
        log.exception("job %s failed: %s", job_run_id, exc)
        outcome = IngestOutcome(source=source, status=OutcomeStatus.FAILED, table=table.qualified, message=str(exc))
    _record(settings, table, source, {
        "final_state": "FAILED" if outcome.status is OutcomeStatus.FAILED else "SUCCESS",
        "outcome": outcome.status.value, "branch": outcome.branch, "rows": outcome.rows, "message": outcome.message,
        "finished_at": _now()})
    print(json.dumps({"job_run_id": job_run_id, **outcome.to_dict()}, default=str), flush=True)
    return 1 if outcome.status is OutcomeStatus.FAILED else 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _record(settings: Settings, table: TableRef, source: SourceObject, result: dict[str, Any]) -> None:
    """Add this run's result to the submission record (best effort: the alert and the catalog already tell it), with
    a conditional write: never over a change made meanwhile, and never onto a later run's record (the sweep
    resubmitted this one, which it had found stuck)."""
    records, key = EmrRecords(s3_for(settings), settings.lake_bucket), record_key(table, source)
    job_run_id = _job_run_id()
    try:
        for _ in range(5):
            stored = records.read(key)
            if stored is None:
                base = {"object": source.uri, "bucket": source.bucket, "key": source.key,
                        "identity": source.identity, "table": table.qualified}
                if records.create(key, base | result) is not None:
                    return
                continue
            recorded = stored.body.get("job_run_id")
            if recorded and job_run_id not in ("local", recorded):
                log.warning("the record at %s names job run %s, not this one (%s): a later run owns it; this run's "
                            "result is not recorded", records.uri(key), recorded, job_run_id)
                return
            if records.replace(stored, stored.body | result) is not None:
                return
        log.warning("the record at %s kept changing: this run's result is not recorded", records.uri(key))
    except WapError as exc:
        log.warning("could not record the outcome at %s: %s", records.uri(key), exc)


if __name__ == "__main__":
    sys.exit(main())
