"""The worker side of workloads 4 and 5: one process per measured way, so that its tree's peak memory is its own
(benchmarks/memory.py). Each prints one JSON line last:

    python -m benchmarks.large_workers {service,baseline,floor,emr} ...

Every way starts the same: its imports, then one untimed warm-up file (the large file's first rows) into the same
fresh table, then the timed large file. Each reports its seconds per step:
- service: download (the service's own S3 download, timed around it), then the pipeline's stages (`append`
  holds the download, Spark's read+write job and the Iceberg commit, and the new files' metrics), and Spark's own
  jobs (from its status store) to split the write job from the rest: `append.read` (the file's schema and the
  read's plan: Spark reads the rows inside the write job), `append.write_job` (reading and writing the rows, one
  job), `append.commit` (the rest of the write call: its planning and the Iceberg commit), `append.metrics`;
- baseline: read (pyarrow from S3), branch, write (data and manifest files), commit, audit, merge;
- floor: download (the same parallel ranged download as the service), pyarrow read, write with zstd at level 3
  (the codec and level Iceberg's Spark writer uses by default) and, separately, with snappy (pyarrow's default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WARM_ROWS = 1_000
# The level Iceberg's Java writer uses for zstd when the table sets none (parquet-mr's default): the floor writes
# with the service's codec and level. PyIceberg (the baseline) writes zstd at pyarrow's default level.
ICEBERG_ZSTD_LEVEL = 3


def spark_jobs(spark: Any, since_ms: int) -> list[dict[str, Any]]:
    """Spark's jobs that started after `since_ms` (epoch ms): description, seconds, tasks. Empty if unavailable."""
    try:
        jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(spark._jvm.java.util.ArrayList())  # empty: all
        found = []
        for i in range(jobs.size()):
            job = jobs.apply(i)  # a Scala Seq
            submitted, completed = job.submissionTime(), job.completionTime()
            if submitted.isEmpty() or completed.isEmpty() or submitted.get().getTime() < since_ms:
                continue
            found.append({"name": str(job.name())[:80], "seconds": (completed.get().getTime() -
                                                                   submitted.get().getTime()) / 1000,
                          "tasks": int(job.numTasks())})
        return sorted(found, key=lambda j: -j["seconds"])
    except Exception as exc:  # py4j or a Spark without the status store: the stage figures still stand
        return [{"name": f"unavailable: {type(exc).__name__}", "seconds": None, "tasks": None}]


def ingest_with_service(service: Any, bucket: str, key: str, warm_key: str) -> dict[str, Any]:
    from benchmarks.step_profile import Steps
    from wap_ingest.adapters.catalog import tables as catalog_tables
    from wap_ingest.adapters.engine import register as spark_register
    from wap_ingest.adapters.engine import tables as spark_tables
    from wap_ingest.adapters.engine import writer as spark_writer
    from wap_ingest.core.models import SourceObject

    store, downloads = service.objects, []
    download = store.download

    def timed_download(source: Any, directory: Path, *stop: Any) -> Path:
        started = time.perf_counter()
        path = download(source, directory, *stop)
        downloads.append(time.perf_counter() - started)
        return Path(path)

    store.download = timed_download  # the bench's stopwatch around the service's own download
    steps = Steps()  # the stopwatch around the writer's own calls, for the timed file only
    try:
        started = time.perf_counter()
        warm = service.ingest(SourceObject(bucket, warm_key))  # the JVM, the session, the catalog classes, the table
        warmed, warm_downloads = time.perf_counter(), len(downloads)
        since_ms = int(time.time() * 1000)
        steps.wrap(spark_writer, "read_source", "append.read")
        steps.wrap(spark_tables.IcebergTables, "write", "append.write")
        steps.wrap(spark_writer, "added_file_metrics", "append.metrics")
        steps.wrap(spark_writer, "register", "append.register")  # the register path (issue 27): its own steps
        steps.wrap(store, "read_tail", "append.register.footer")
        steps.wrap(store, "copy_into", "append.register.copy")
        steps.wrap(catalog_tables.BranchTables, "load", "append.register.load")  # the table read through Nessie
        steps.wrap(spark_register, "_checked", "append.register.measure_wait")  # the pages' measurement awaited
        steps.wrap(catalog_tables._BranchCommitter, "commit_table", "append.register.catalog_commit")  # metadata+Nessie
        outcome = service.ingest(SourceObject(bucket, key))
        seconds = time.perf_counter() - warmed
    finally:
        steps.restore()
        del store.download  # the class's own method again
    jobs = spark_jobs(service.engine.session(), since_ms)
    spent, _ = steps.take()
    write_job = next((j["seconds"] for j in jobs if j["name"].startswith("append") and j["seconds"]), None)
    if write_job is not None and "append.write" in spent:
        spent["append.write_job"], spent["append.commit"] = write_job, spent.pop("append.write") - write_job
    stages = {k: round(v, 3) for k, v in (outcome.timings | spent).items()}
    return {"status": outcome.status.value, "rows": outcome.rows, "seconds": round(seconds, 3),
            "warmup_s": round(warmed - started, 3), "warmup_status": warm.status.value,
            "driver_memory": service.settings.spark_driver_memory, "cores": os.cpu_count(),
            "audited": [f"{c.check} {c.target}" for c in outcome.report.checks] if outcome.report else [],
            "message": outcome.message, "registered": "; registered (" in outcome.message,
            "stages_s": stages | ({"download": round(downloads[-1], 3)} if len(downloads) > warm_downloads else {}),
            "spark_jobs": jobs}


def ingest_with_baseline(bucket: str, key: str, warm_key: str, table: str) -> dict[str, Any]:
    from benchmarks.baseline import Baseline
    from benchmarks.flights import NOT_NULL_COLUMN

    started = time.perf_counter()
    baseline = Baseline(os.environ["NESSIE_ENDPOINT"], os.environ.get("AWS_ENDPOINT_URL"),
                        os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    baseline.ingest(bucket, warm_key, table, NOT_NULL_COLUMN)  # the same warm-up as the service's
    warmed = time.perf_counter()
    times = baseline.ingest(bucket, key, table, NOT_NULL_COLUMN)
    return times.as_dict() | {"warmup_s": round(warmed - started, 3)}


def floor(bucket: str, key: str, warm_key: str, out: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from wap_ingest.adapters.aws.s3 import S3ObjectStore, s3_client_for

    store = S3ObjectStore(s3_client_for(os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                                        os.environ.get("AWS_ENDPOINT_URL"), 60.0))

    def copy(key: str, scratch: Path) -> tuple[dict[str, float], int]:
        source = store.head(bucket, key)
        started = time.perf_counter()
        staged = store.download(source, scratch)
        downloaded = time.perf_counter()
        table = pq.read_table(staged)
        read = time.perf_counter()
        pq.write_table(table, out, compression="zstd", compression_level=ICEBERG_ZSTD_LEVEL)
        written = time.perf_counter()
        pq.write_table(table, out, compression="snappy")
        steps = {"download": downloaded - started, "read": read - downloaded, "write_zstd": written - read,
                 "write_snappy": time.perf_counter() - written}
        staged.unlink()
        return steps, table.num_rows

    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        copy(warm_key, Path(scratch))  # the same warm-up as the other ways (the lazy imports of pyarrow's readers)
        steps, rows = copy(key, Path(scratch))
    out.unlink(missing_ok=True)
    common = steps["download"] + steps["read"]
    return {"seconds": round(common + steps["write_zstd"], 3), "rows": rows,
            "seconds_snappy": round(common + steps["write_snappy"], 3),
            "stages_s": {k: round(v, 3) for k, v in steps.items()}}


def run_emr_job(application_id: str, job_run_id: str, work_dir: Path, jars: Path) -> dict[str, Any]:
    import boto3

    from wap_stack.emr import run_job

    started = time.perf_counter()
    code = run_job(boto3.client("emr-serverless"), boto3.client("s3"), application_id, job_run_id, work_dir, jars)
    seconds = time.perf_counter() - started
    log = (work_dir / job_run_id / "driver.log").read_text(errors="replace").splitlines()
    outcome = next((line for line in reversed(log) if line.startswith('{"job_run_id"')), None)
    return {"exit_code": code, "seconds": round(seconds, 3), "outcome": json.loads(outcome) if outcome else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One measured way of ingesting the large file")
    modes = parser.add_subparsers(dest="mode", required=True)
    service, baseline, floor_mode = modes.add_parser("service"), modes.add_parser("baseline"), modes.add_parser("floor")
    for sub in (service, baseline, floor_mode):
        sub.add_argument("--bucket", required=True)
        sub.add_argument("--key", required=True)
    for sub in (service, baseline, floor_mode):
        sub.add_argument("--warm-key", required=True)
    baseline.add_argument("--table", required=True)
    floor_mode.add_argument("--out", type=Path, required=True)
    emr = modes.add_parser("emr")
    emr.add_argument("--application-id", required=True)
    emr.add_argument("--job-run-id", required=True)
    emr.add_argument("--work-dir", type=Path, required=True)
    emr.add_argument("--jars", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.mode == "service":
        from wap_ingest.bootstrap import build_service
        from wap_ingest.bootstrap.config import Settings

        result = ingest_with_service(build_service(Settings.from_env()), args.bucket, args.key, args.warm_key)
    elif args.mode == "baseline":
        result = ingest_with_baseline(args.bucket, args.key, args.warm_key, args.table)
    elif args.mode == "floor":
        result = floor(args.bucket, args.key, args.warm_key, args.out)
    else:
        result = run_emr_job(args.application_id, args.job_run_id, args.work_dir, args.jars)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
