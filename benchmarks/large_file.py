"""Workloads 4 and 5: one large file (benchmarks/flights.py), each way of ingesting it run as its own process
whose tree's peak memory is sampled (benchmarks/memory.py):

4. the service's one-file path, `service.ingest(source)` as the function runs it (Spark local[*], the driver
   memory the function gets from AWS_LAMBDA_FUNCTION_MEMORY_SIZE), after a warm-up file in the same process;
   the baseline (benchmarks/baseline.py: PyIceberg append, full-scan null check, merge); and the physical
   floor, a plain pyarrow read of the same local file and write to parquet;
5. the EMR job entry point under spark-submit: the job is submitted through the service (`jobs.submit`, the
   request the function sends) and run as the local stack's EMR runner runs it (`wap_ingest.local.emr.run_job`).

A failure of the service's path or of the EMR job (an outcome other than published, a crashed JVM) is recorded
as that way's result, with the path of its whole output under <stack dir>/logs/large-file/, and the bench goes
on; a failure of the baseline or the floor (the references) ends it.

The parent side (`LargeFile`) prepares the files and the processes; the worker side is this module's command:

    python -m benchmarks.large_file {service,baseline,floor,emr} ...   (prints one JSON line last)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.flights import NOT_NULL_COLUMN, write_flights
from benchmarks.memory import Measured, run_measured

ROOT = Path(__file__).resolve().parents[1]
INBOX = "bench-inbox"
FUNCTION_MEMORY_MB = 4096  # the function's memory: WAP_SPARK_DRIVER_MEMORY defaults to 60% of it
JVM_CRASH = "A fatal error has been detected by the Java Runtime Environment"
# What the large tables audit: the column the baseline's full scan checks (bench_emr: workload 5).
AUDITS = {"bench_large": [{"check": "not_null", "columns": [NOT_NULL_COLUMN]}, {"check": "row_count", "min": 1}],
          "bench_emr": [{"check": "not_null", "columns": [NOT_NULL_COLUMN]}, {"check": "row_count", "min": 1}]}


def audits_with_large_tables(base: Path, target: Path) -> Path:
    """The audits file the stack runs with: `base` plus the large-file tables' suites."""
    import yaml

    document = yaml.safe_load(base.read_text(encoding="utf-8")) or {}
    document.setdefault("tables", {}).update(AUDITS)
    target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return target


# --- the parent side -------------------------------------------------------------------------------------


def _worker(mode: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.large_file", mode, *arguments]


class WorkerError(RuntimeError):
    """A measured way did not do its work. For the service's paths this is a result, not the bench's end."""

    def __init__(self, message: str, log: Path, peak_tree_mib: float | None = None) -> None:
        super().__init__(f"{message} (whole output: {log})")
        self.log, self.peak_tree_mib = log, peak_tree_mib

    def to_result(self) -> dict[str, Any]:
        return {"failed": str(self), "log": str(self.log), "peak_tree_mib": self.peak_tree_mib}


def _result(measured: Measured, what: str, log: Path) -> dict[str, Any]:
    """The worker's JSON line and its measurements; its whole output is kept in `log` (it outlives the run)."""
    output = f"{measured.stdout}\n--- stderr ---\n{measured.stderr}"
    log.write_text(output)
    lines = measured.stdout.strip().splitlines()
    if measured.returncode != 0 or not lines:
        why = measured.stderr.strip().splitlines()[-1:] or ["no output"]
        if JVM_CRASH in output:  # the JVM's report names the frame it crashed in
            frame = output.split("# Problematic frame:\n", 1)[-1].split("\n", 1)[0].lstrip("# ")
            why = [f"the JVM crashed (SIGSEGV or similar) in {frame}"]
        raise WorkerError(f"{what} exited {measured.returncode}: {why[0]}", log, measured.peak_tree_mib)
    result: dict[str, Any] = json.loads(lines[-1])
    return result | {"wall_s": round(measured.wall_s, 2), "peak_tree_mib": measured.peak_tree_mib,
                     "memory_samples": measured.samples}


def _summary(runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    """Medians over the runs that did their work; the largest peak over all (a failed run's until it failed)."""
    done = [r for r in runs if "failed" not in r]
    peaks = [r["peak_tree_mib"] for r in runs if r.get("peak_tree_mib") is not None]
    summary = {"peak_tree_mib": max(peaks) if peaks else None, "failed_runs": len(runs) - len(done), "runs": runs}
    if not done:
        return summary | {"median_s": None, "rows_per_s": None, "samples_s": [], "failed": runs[0]["failed"]}
    seconds = statistics.median(r["seconds"] for r in done)
    return summary | {"median_s": round(seconds, 3), "rows_per_s": round(rows / seconds),
                      "samples_s": [r["seconds"] for r in done]}


def _worker_env(env: dict[str, str]) -> dict[str, str]:
    """Workers run in the logs folder (a crashing JVM writes its report to its working directory)."""
    return env | {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)}


class LargeFile:
    def __init__(self, s3: Any, env: dict[str, str], work: Path, rows: int, in_process: Any = None,
                 function_memory_mb: int = FUNCTION_MEMORY_MB) -> None:
        """`in_process`: a Service to run the service's path in this process (--smoke: no second JVM start;
        its memory is then not measured)."""
        self.s3, self.env, self.work, self.in_process = s3, _worker_env(env), work, in_process
        self.function_memory_mb = function_memory_mb
        self.logs = work.parent / "logs" / "large-file"  # the stack's logs folder: kept after the run
        self.logs.mkdir(parents=True, exist_ok=True)
        self.path = work / "flights.parquet"
        self.file = write_flights(self.path, rows)
        self.rows = rows

    def upload(self, key: str) -> None:
        # One PUT, not upload_file's multipart upload: with moto, a multipart object's checksum fails boto3's
        # validation when the service downloads it (FlexibleChecksumError).
        with self.path.open("rb") as body:
            self.s3.put_object(Bucket=INBOX, Key=key, Body=body)

    def function_env(self, name: str) -> dict[str, str]:
        env = {k: v for k, v in self.env.items() if k != "WAP_SPARK_DRIVER_MEMORY"}
        return env | {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.function_memory_mb),
                      "WAP_WORK_DIR": str(self.work / name)}

    def service(self, n: int, warm_key: str) -> dict[str, Any]:
        key = f"bench_large/r{n}.parquet"
        self.upload(key)
        if self.in_process is not None:
            result = ingest_with_service(self.in_process, INBOX, key, warm_key) | {"peak_tree_mib": None,
                                                                                     "in_process": True}
        else:
            measured = run_measured(_worker("service", "--bucket", INBOX, "--key", key, "--warm-key", warm_key),
                                    self.function_env(f"service-{n}"), cwd=self.logs)
            try:
                result = _result(measured, "the service's one-file path", self.logs / f"service-{n}.log")
            except WorkerError as exc:
                return exc.to_result()
        if result["status"] != "published" or result["rows"] != self.rows:
            return {"failed": f"the service did not publish the large file: {result}"} | result
        if not any(NOT_NULL_COLUMN in check for check in result["audited"]):
            raise RuntimeError(f"the service did not audit {NOT_NULL_COLUMN} as the baseline does: {result}")
        return result

    def baseline(self, n: int) -> dict[str, Any]:
        key = f"baseline_large/{n}.parquet"
        self.upload(key)
        measured = run_measured(_worker("baseline", "--bucket", INBOX, "--key", key, "--table", "wap.baseline_large"),
                                self.env, cwd=self.logs)
        result = _result(measured, "the baseline", self.logs / f"baseline-{n}.log")
        if result["nulls"] != 0:
            raise RuntimeError(f"the baseline found nulls in {NOT_NULL_COLUMN}: {result}")
        return result

    def floor(self, n: int) -> dict[str, Any]:
        out = self.work / f"floor-{n}.parquet"
        try:
            measured = run_measured(_worker("floor", "--path", str(self.path), "--out", str(out)), self.env,
                                    cwd=self.logs)
        finally:
            out.unlink(missing_ok=True)
        return _result(measured, "the pyarrow floor", self.logs / f"floor-{n}.log")

    def compare(self, runs: int, put_warm: Any) -> dict[str, Any]:
        """Workload 4: each way `runs` times, medians and the largest peak. Runs append to one table per way
        (wap.bench_large, wap.baseline_large): the baseline's full scan reads what earlier runs appended."""
        service, baseline, floor = [], [], []
        for n in range(runs):
            warm_key = f"bench_large_warmup/w{n}.parquet"
            put_warm(INBOX, warm_key, 1000)
            service.append(self.service(n, warm_key))
            baseline.append(self.baseline(n))
            floor.append(self.floor(n))
        return {"file": self.file, "function_memory_mb": self.function_memory_mb,
                "service": _summary(service, self.rows), "baseline": _summary(baseline, self.rows),
                "pyarrow_floor": _summary(floor, self.rows)}

    def emr(self, service: Any, jars: Path) -> dict[str, Any]:
        """Workload 5: the job submitted through the service's port, run with spark-submit as the local runner
        does; seconds are the spark-submit's wall time (JVM start included, as a job run's)."""
        from wap_ingest.core.models import SourceObject, TableRef

        if service.large_files is None:
            raise RuntimeError("the service has no EMR jobs port: the stack did not register EMR Serverless")
        key = "bench_emr/flights.parquet"
        self.upload(key)
        head = self.s3.head_object(Bucket=INBOX, Key=key)
        source = SourceObject(INBOX, key, size=int(head["ContentLength"]), etag=str(head["ETag"]).strip('"'),
                              version_id=head.get("VersionId"))
        run = service.large_files.jobs.submit(source, TableRef("wap", "bench_emr"))
        measured = run_measured(_worker("emr", "--application-id", run.application_id, "--job-run-id",
                                        run.job_run_id, "--work-dir", str(self.work / "emr"), "--jars", str(jars)),
                                self.env, cwd=self.logs)
        job = {"file": self.file, "job_run_id": run.job_run_id, "master": "local[2]", "driver_memory": "2g"}
        try:
            result = _result(measured, "the EMR job under spark-submit", self.logs / "emr.log")
        except WorkerError as exc:
            return job | exc.to_result() | {"spark_submit_s": None, "rows_per_s": None}
        outcome = result.get("outcome") or {}
        if result["exit_code"] != 0 or outcome.get("status") != "published" or outcome.get("rows") != self.rows:
            driver_log = self.logs / "emr-driver.log"  # the job's folder goes with the work folder
            shutil.copyfile(self.work / "emr" / run.job_run_id / "driver.log", driver_log)
            return job | {"failed": f"the EMR job did not publish the large file: {result}", "log": str(driver_log),
                          "peak_tree_mib": result["peak_tree_mib"], "spark_submit_s": None, "rows_per_s": None}
        audited = [f"{c['check']} {c['target']}" for c in (outcome.get("report") or {}).get("checks", [])]
        if not any(NOT_NULL_COLUMN in check for check in audited):
            raise RuntimeError(f"the EMR job did not audit {NOT_NULL_COLUMN}: {result}")
        return job | {"spark_submit_s": result["seconds"], "audited": audited,
                      "rows_per_s": round(self.rows / result["seconds"]), "peak_tree_mib": result["peak_tree_mib"]}


# --- the worker side: one process per measurement --------------------------------------------------------


def ingest_with_service(service: Any, bucket: str, key: str, warm_key: str) -> dict[str, Any]:
    from wap_ingest.core.models import SourceObject

    started = time.perf_counter()
    warm = service.ingest(SourceObject(bucket, warm_key))  # the JVM, the session and the catalog classes
    warmed = time.perf_counter()
    outcome = service.ingest(SourceObject(bucket, key))
    seconds = time.perf_counter() - warmed
    return {"status": outcome.status.value, "rows": outcome.rows, "seconds": round(seconds, 3),
            "warmup_s": round(warmed - started, 3), "warmup_status": warm.status.value,
            "driver_memory": service.settings.spark_driver_memory,
            "audited": [f"{c.check} {c.target}" for c in outcome.report.checks] if outcome.report else [],
            "stages_s": {k: round(v, 3) for k, v in outcome.timings.items()}}


def ingest_with_baseline(bucket: str, key: str, table: str) -> dict[str, Any]:
    import boto3

    from benchmarks.baseline import Baseline

    times = Baseline(os.environ["NESSIE_ENDPOINT"], boto3.client("s3")).ingest(bucket, key, table, NOT_NULL_COLUMN)
    return {"seconds": round(times.total, 3), "nulls": times.nulls,
            "stages_s": {"append": round(times.append, 3), "audit": round(times.audit, 3),
                         "merge": round(times.merge, 3)}}


def read_and_write(path: Path, out: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    started = time.perf_counter()
    table = pq.read_table(path)
    pq.write_table(table, out)
    return {"seconds": round(time.perf_counter() - started, 3), "rows": table.num_rows}


def run_emr_job(application_id: str, job_run_id: str, work_dir: Path, jars: Path) -> dict[str, Any]:
    import boto3

    from wap_ingest.local.emr import run_job

    started = time.perf_counter()
    code = run_job(boto3.client("emr-serverless"), boto3.client("s3"), application_id, job_run_id, work_dir, jars)
    seconds = time.perf_counter() - started
    log = (work_dir / job_run_id / "driver.log").read_text(errors="replace").splitlines()
    outcome = next((line for line in reversed(log) if line.startswith('{"job_run_id"')), None)
    return {"exit_code": code, "seconds": round(seconds, 3), "outcome": json.loads(outcome) if outcome else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One measured way of ingesting the large file")
    modes = parser.add_subparsers(dest="mode", required=True)
    service = modes.add_parser("service")
    baseline = modes.add_parser("baseline")
    for sub in (service, baseline):
        sub.add_argument("--bucket", required=True)
        sub.add_argument("--key", required=True)
    service.add_argument("--warm-key", required=True)
    baseline.add_argument("--table", required=True)
    floor = modes.add_parser("floor")
    floor.add_argument("--path", type=Path, required=True)
    floor.add_argument("--out", type=Path, required=True)
    emr = modes.add_parser("emr")
    emr.add_argument("--application-id", required=True)
    emr.add_argument("--job-run-id", required=True)
    emr.add_argument("--work-dir", type=Path, required=True)
    emr.add_argument("--jars", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.mode == "service":
        from wap_ingest.bootstrap import build_service
        from wap_ingest.config import Settings

        result = ingest_with_service(build_service(Settings.from_env()), args.bucket, args.key, args.warm_key)
    elif args.mode == "baseline":
        result = ingest_with_baseline(args.bucket, args.key, args.table)
    elif args.mode == "floor":
        result = read_and_write(args.path, args.out)
    else:
        result = run_emr_job(args.application_id, args.job_run_id, args.work_dir, args.jars)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
