"""Workloads 4 and 5: one large file (benchmarks/flights.py), each way of ingesting it run as its own process
(benchmarks/large_workers.py) whose tree's peak memory is sampled (benchmarks/memory.py):

4. the service's one-file path, `service.ingest(source)` as the function runs it (Spark local[*], the driver
   memory the function gets from AWS_LAMBDA_FUNCTION_MEMORY_SIZE), on both of its paths for a Parquet file: into a
   table that rewrites it (`service`) and into one that registers it (`service_register`, issue 27); the baseline
   (the reference, benchmarks/baseline.py); and the floor (download, pyarrow read, parquet write). Each run of each
   way has a fresh table of its own, and the service and the baseline each ingest the same warm-up file into it
   first (untimed);
5. the EMR job entry point under spark-submit: the job is submitted through the service (`jobs.submit`, the
   request the function sends) and run as the local stack's EMR runner runs it (`wap_stack.emr.run_job`);
   its table keeps the default (`write: auto`), so the job registers the file;
7. a 1 GiB Parquet file (the same flights rows, repeated) to `main` in the function, each path once per run (the
   function's size threshold raised above it for these runs, as a deployment with WAP_LARGE_FILE_BYTES above 1 GiB
   has it); no floor (pyarrow's read of it alone would hold several GiB).

A failure of the service's path or of the EMR job (an outcome other than published, a crashed JVM) is recorded
as that way's result, with the path of its whole output under <stack dir>/logs/large-file/, and the bench goes
on; a failure of the baseline or the floor (the references) ends it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.flights import NOT_NULL_COLUMN, write_flights, write_flights_of_size
from benchmarks.large_workers import WARM_ROWS, ingest_with_service
from benchmarks.memory import Measured, run_measured

ROOT = Path(__file__).resolve().parents[1]
INBOX = "bench-inbox"
FUNCTION_MEMORY_MB = 4096  # the function's memory: WAP_SPARK_DRIVER_MEMORY defaults to 60% of it
JVM_CRASH = "A fatal error has been detected by the Java Runtime Environment"
# --- the parent side -------------------------------------------------------------------------------------


def _worker(mode: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.large_workers", mode, *arguments]


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


def pq_row_groups(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_row_groups)


def _summary(runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    """Medians over the runs that did their work; the largest peak over all (a failed run's until it failed)."""
    done = [r for r in runs if "failed" not in r]
    peaks = [r["peak_tree_mib"] for r in runs if r.get("peak_tree_mib") is not None]
    summary = {"peak_tree_mib": max(peaks) if peaks else None, "failed_runs": len(runs) - len(done), "runs": runs}
    if not done:
        return summary | {"median_s": None, "rows_per_s": None, "samples_s": [], "failed": runs[0]["failed"]}
    seconds = statistics.median(r["seconds"] for r in done)
    steps = {name for r in done for name in r.get("stages_s", {})}
    stages = {name: round(statistics.median(r["stages_s"].get(name, 0.0) for r in done), 3) for name in sorted(steps)}
    return summary | {"median_s": round(seconds, 3), "rows_per_s": round(rows / seconds),
                      "samples_s": [r["seconds"] for r in done], "stages_median_s": stages}


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
        self.warm_path = work / "warm.parquet"
        write_flights(self.warm_path, min(WARM_ROWS, rows))
        self.rows = rows

    def upload(self, key: str, path: Path | None = None) -> None:
        # One PUT, not upload_file's multipart upload: with moto, a multipart object's checksum fails boto3's
        # validation when the service downloads it (FlexibleChecksumError).
        with (path or self.path).open("rb") as body:
            self.s3.put_object(Bucket=INBOX, Key=key, Body=body)

    def upload_pair(self, prefix: str) -> tuple[str, str]:
        """(the large file's key, the warm-up file's key) under `prefix` (the table they route to)."""
        key, warm_key = f"{prefix}/flights.parquet", f"{prefix}/warm.parquet"
        self.upload(key)
        self.upload(warm_key, self.warm_path)
        return key, warm_key

    def function_env(self, name: str) -> dict[str, str]:
        env = {k: v for k, v in self.env.items() if k != "WAP_SPARK_DRIVER_MEMORY"}
        return env | {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.function_memory_mb),
                      "WAP_WORK_DIR": str(self.work / name)}

    def service(self, n: int, prefix: str = "bench_large", rows: int | None = None,
                env: dict[str, str] | None = None) -> dict[str, Any]:
        """The service's one-file path into `<prefix>_<n>` (bench_large: rewritten; bench_large_register:
        registered, as the tables' `write:` says)."""
        key, warm_key = self.upload_pair(f"{prefix}_{n}")
        registering = "register" in prefix
        name = f"{prefix.removeprefix('bench_')}-{n}"
        if self.in_process is not None:
            result = ingest_with_service(self.in_process, INBOX, key, warm_key) | {"peak_tree_mib": None,
                                                                                     "in_process": True}
        else:
            measured = run_measured(_worker("service", "--bucket", INBOX, "--key", key, "--warm-key", warm_key),
                                    self.function_env(name) | (env or {}), cwd=self.logs)
            try:
                result = _result(measured, "the service's one-file path", self.logs / f"{name}.log")
            except WorkerError as exc:
                return exc.to_result()
        if result["status"] != "published" or result["rows"] != (rows or self.rows) or \
                result.get("registered") is not registering:
            return {"failed": f"the service did not publish the large file by its path: {result}"} | result
        if not any(NOT_NULL_COLUMN in check for check in result["audited"]):
            raise RuntimeError(f"the service did not audit {NOT_NULL_COLUMN} as the baseline does: {result}")
        return result

    def baseline(self, n: int) -> dict[str, Any]:
        key, warm_key = self.upload_pair(f"baseline_large_{n}")
        measured = run_measured(_worker("baseline", "--bucket", INBOX, "--key", key, "--warm-key", warm_key,
                                        "--table", f"wap.baseline_large_{n}"), self.env, cwd=self.logs)
        result = _result(measured, "the baseline", self.logs / f"baseline-{n}.log")
        if result["nulls"] != 0 or result["rows"] != self.rows:
            raise RuntimeError(f"the baseline did not ingest the large file whole: {result}")
        return result

    def floor(self, n: int) -> dict[str, Any]:
        key, warm_key = self.upload_pair(f"floor_{n}")
        measured = run_measured(_worker("floor", "--bucket", INBOX, "--key", key, "--warm-key", warm_key, "--out",
                                        str(self.work / f"floor-{n}.parquet")), self.env, cwd=self.logs)
        return _result(measured, "the floor", self.logs / f"floor-{n}.log")

    def compare(self, runs: int) -> dict[str, Any]:
        """Workload 4: each way `runs` times (interleaved), medians and the largest peak."""
        service, register, baseline, floor = [], [], [], []
        for n in range(runs):
            service.append(self.service(n))
            register.append(self.service(n, "bench_large_register"))
            baseline.append(self.baseline(n))
            floor.append(self.floor(n))
        done = [r for r in floor if "failed" not in r]
        snappy = statistics.median(r["seconds_snappy"] for r in done) if done else None
        return {"file": self.file | {"row_groups": pq_row_groups(self.path)},
                "measuring": measuring_cost(self.path, runs),
                "function_memory_mb": self.function_memory_mb,
                "service": _summary(service, self.rows), "service_register": _summary(register, self.rows),
                "baseline": _summary(baseline, self.rows),
                "pyarrow_floor": _summary(floor, self.rows) | {
                    "codec": "zstd", "median_s_snappy": snappy,
                    "rows_per_s_snappy": round(self.rows / snappy) if snappy else None}}

    def gib(self, runs: int, target_bytes: int = 1024**3) -> dict[str, Any]:
        """Workload 7: a Parquet file of `target_bytes` (1 GiB) to main in the function, on each path `runs` times
        (interleaved); the function's threshold is raised above the file for these runs only."""
        path = self.work / "gib.parquet"
        written = write_flights_of_size(path, target_bytes)
        big = {"WAP_LARGE_FILE_BYTES": str(2 * target_bytes)}
        original, self.path = self.path, path
        try:
            ways: dict[str, list[dict[str, Any]]] = {"rewrite": [], "register": []}
            for n in range(runs):
                for way, found in ways.items():
                    found.append(self.service(n, f"bench_gib_{way}", int(written["rows"]), big))
        finally:
            self.path = original
            path.unlink(missing_ok=True)
        return {"file": written, "function_memory_mb": self.function_memory_mb,
                **{way: _summary(found, int(written["rows"])) for way, found in ways.items()}}

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




def measuring_cost(path: Path, runs: int) -> dict[str, Any]:
    """What the register path's measuring costs (issue 33): the same local file's pages decoded alone (as the
    rewrite path's check decodes them) and decoded and measured, every claim checked (as the register path does),
    each in the isolation worker, alternately `runs` times; medians."""
    from wap_ingest.adapters.engine.parquet_decode import check_parquet, measure_parquet

    decode: list[float] = []
    measure: list[float] = []
    for _ in range(max(runs, 3)):
        started = time.perf_counter()
        check_parquet(path, "bench", "bench")
        decode.append(time.perf_counter() - started)
        started = time.perf_counter()
        found = measure_parquet(path, "bench", "bench")
        measure.append(time.perf_counter() - started)
        if isinstance(found, str) or found.problem:
            raise RuntimeError(f"the bench's file did not measure cleanly: {found}")
    decoded, measured = statistics.median(decode), statistics.median(measure)
    return {"decode_median_s": round(decoded, 3), "decode_and_measure_median_s": round(measured, 3),
            "measuring_s": round(measured - decoded, 3), "ratio": round(measured / decoded, 3),
            "decode_samples_s": [round(x, 3) for x in decode], "measure_samples_s": [round(x, 3) for x in measure]}
