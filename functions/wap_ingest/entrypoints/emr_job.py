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
Otherwise it runs branch, append, audit, merge-or-reject and the alert exactly as the function does (the use cases
the composition root hands it, bootstrap/emr_job.py: the pipeline with the submitted Spark session), records the
outcome in the submission record in the lake bucket (what `wap branches` shows; a conditional write, as every change
of that record), and exits 0 for every outcome of the
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

from wap_ingest.bootstrap import EmrJobUseCases, emr_job
from wap_ingest.core.errors import WapError
from wap_ingest.core.ingest import Delivery
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject

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


def _maintain(job: EmrJobUseCases, name: str, expected_digest: str | None) -> int:
    """The maintenance of one large table, here (never sent to EMR again); 1 if it failed or was refused."""
    table = job.table(name, "--maintain")
    job_run_id = _job_run_id()
    refused = job.refusal(expected_digest, what=f"the maintenance of {table}", job_run_id=job_run_id,
                          again=f"the next schedule maintains it (at once: `wap maintain {table.qualified}`)")
    if refused is not None:
        print(json.dumps({"job_run_id": job_run_id, "table": table.qualified, "error": refused}), flush=True)
        return 1
    result = job.maintain(table)
    if isinstance(result, WapError):
        print(json.dumps({"job_run_id": job_run_id, "table": table.qualified, "error": str(result)}), flush=True)
        return 1
    print(json.dumps({"job_run_id": job_run_id, **result.to_dict()}, default=str), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='{"ts":"%(asctime)s","level":"%(levelname)s",'
                        '"logger":"%(name)s","message":"%(message)s"}')
    args = _arguments(argv)
    job = emr_job()
    if args.maintain:
        return _maintain(job, args.maintain, args.audits_digest)
    source = SourceObject(bucket=args.bucket, key=args.key, size=args.size, etag=args.etag,
                          version_id=args.version_id)
    table = job.table(args.table, "--table")
    job_run_id = _job_run_id()
    refused = job.refusal(args.audits_digest, what=f"{source.uri} into {table}", job_run_id=job_run_id,
                          again=f"the daily sweep resubmits the refused run (at once: `wap ingest {source.uri} "
                          f"--table {table.qualified}`), up to WAP_EMR_MAX_ATTEMPTS runs")
    if refused is not None:
        job.record(table, source, job_run_id, {
            "final_state": "FAILED", "outcome": OutcomeStatus.FAILED.value, "message": refused, "branch": None,
            "rows": None, "finished_at": _now(), "refused": "audits"})
        print(json.dumps({"job_run_id": job_run_id, "object": source.uri, "status": "failed", "message": refused}),
              flush=True)
        return 1
    log.info("job %s: WAP for %s into %s", job_run_id, source.uri, table)
    delivery = Delivery(correlation_id=f"emr:{job_run_id}:{source.key}")
    try:
        # a manifest runs its load, recorded under `table`, its first table (core.ingest.item_for_job)
        outcome = job.ingest(source, table, delivery)
    except WapError as exc:
        log.exception("job %s failed: %s", job_run_id, exc)
        outcome = IngestOutcome(source=source, status=OutcomeStatus.FAILED, table=table.qualified, message=str(exc))
    job.record(table, source, job_run_id, {
        "final_state": "FAILED" if outcome.status is OutcomeStatus.FAILED else "SUCCESS",
        "outcome": outcome.status.value, "branch": outcome.branch, "rows": outcome.rows, "message": outcome.message,
        "finished_at": _now()})
    print(json.dumps({"job_run_id": job_run_id, **outcome.to_dict()}, default=str), flush=True)
    return 1 if outcome.status is OutcomeStatus.FAILED else 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


if __name__ == "__main__":
    sys.exit(main())
