"""The EMR Serverless job's entry point: the same WAP pipeline for one large file, in the cluster.

    spark-submit [--conf ... from the submission] emr_job.py --bucket B --key K --table NS.T
                 [--size N] [--etag E] [--version-id V]
    spark-submit [--conf ...] emr_job.py --maintain NS.T      (`wap maintain` of a table above its emr_above_mb)

Submitted by the function (adapters/emr.py) with the object version it was notified of; runs branch, append,
audit, merge-or-reject and the alert exactly as the function does (bootstrap's Service with the submitted Spark
session), records the outcome next to the submission record in the lake bucket (what `wap branches` shows), and
exits 0 for every outcome of the pipeline (published, rejected, invalid, duplicate: the job did its work and the
operator was told), 1 for an infrastructure failure (the job run shows FAILED; re-drop the file to retry).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime

from wap_ingest.adapters.emr import record_key
from wap_ingest.adapters.s3 import S3ObjectStore
from wap_ingest.bootstrap import build_service
from wap_ingest.config import Settings
from wap_ingest.core.errors import WapError
from wap_ingest.core.ingest import Delivery
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
    args = parser.parse_args(argv)
    if not args.maintain and not (args.bucket and args.key and args.table):
        parser.error("--bucket, --key and --table are required (or --maintain NS.T)")
    return args


def _maintain(name: str) -> int:
    """The maintenance of one large table, here (never sent to EMR again); 1 if it failed."""
    settings = Settings.from_env()
    table = table_ref_from(name, default_namespace=settings.namespace, source="--maintain")
    job_run_id = os.environ.get("EMR_SERVERLESS_JOB_RUN_ID") or os.environ.get("WAP_EMR_JOB_RUN_ID") or "local"
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
        return _maintain(args.maintain)
    settings = Settings.from_env()
    source = SourceObject(bucket=args.bucket, key=args.key, size=args.size, etag=args.etag,
                          version_id=args.version_id)
    table = table_ref_from(args.table, default_namespace=settings.namespace, source="--table")
    job_run_id = os.environ.get("EMR_SERVERLESS_JOB_RUN_ID") or os.environ.get("WAP_EMR_JOB_RUN_ID") or "local"
    log.info("job %s: WAP for %s into %s", job_run_id, source.uri, table)
    service = build_service(settings, submitted=True)
    delivery = Delivery(correlation_id=f"emr:{job_run_id}:{source.key}")
    try:
        # a manifest runs its multi-table load (its record is kept under `table`, the load's first table)
        outcome = service.ingest(source, table=None if is_manifest(source.key) else table, delivery=delivery)
    except WapError as exc:
        log.exception("job %s failed: %s", job_run_id, exc)
        outcome = IngestOutcome(source=source, status=OutcomeStatus.FAILED, table=table.qualified, message=str(exc))
    _record(service.objects, settings, table, source, outcome)
    print(json.dumps({"job_run_id": job_run_id, **outcome.to_dict()}, default=str), flush=True)
    return 1 if outcome.status is OutcomeStatus.FAILED else 0


def _record(objects: S3ObjectStore, settings: Settings, table: TableRef, source: SourceObject,
            outcome: IngestOutcome) -> None:
    """Add the outcome to the submission record (best effort: the alert and the catalog already tell it)."""
    key = record_key(table, source)
    client = objects.client
    try:
        body = client.get_object(Bucket=settings.lake_bucket, Key=key)["Body"].read()
        record = json.loads(body)
    except Exception:
        record = {"object": source.uri, "bucket": source.bucket, "key": source.key, "identity": source.identity,
                  "table": table.qualified}
    record |= {"final_state": "FAILED" if outcome.status is OutcomeStatus.FAILED else "SUCCESS",
               "outcome": outcome.status.value, "branch": outcome.branch, "rows": outcome.rows,
               "message": outcome.message, "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        client.put_object(Bucket=settings.lake_bucket, Key=key, Body=json.dumps(record).encode(),
                          ContentType="application/json")
    except Exception as exc:
        log.warning("could not record the outcome at s3://%s/%s: %s", settings.lake_bucket, key, exc)


if __name__ == "__main__":
    sys.exit(main())
