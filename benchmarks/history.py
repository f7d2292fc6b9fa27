"""Workload 6 (issue 15): what a table's history costs, and what maintenance gives back.

    python -m benchmarks.history [--loads 10,100,1000] [--unbounded] [--compaction-files 200] [--out DIR]

1. load cost against history: small files (100 rows) ingested one by one into one table through the service's
   pipeline (direct, warm); at each checkpoint (the 10th, 100th and 1,000th load) the median of 5 loads there,
   timed alternately with the 10th to 14th loads of a fresh table (same moment, same machine load), their ratio,
   the size of the table's current metadata file and the time of the ledger lookup alone. With the ingestion's
   snapshot trim (`keep_snapshots`, 50 by default) and, with --unbounded, the same without it (keep_snapshots so
   large it never trims), so the report shows what the trim buys. The target: the 1,000th load within 1.5x of the 10th.
2. compaction: --compaction-files small files, one load each, then `wap maintain`: data files and bytes before and
   after, the row count and a checksum of every row (the same), and a full scan's time (best of 3) before and after.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

RESULTS = Path(__file__).resolve().parent / "results"
INBOX = "bench-history"  # the standalone run's (benchmarks.run passes its own inbox)
WINDOW = 5  # the loads before each checkpoint whose median is reported
_BUCKET = [INBOX]  # where this run's files go (a source bucket of the service)


def small_parquet(rows: int, seed: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"my_col_0": pa.array(range(seed, seed + rows), pa.int64()),
                             "my_col_1": pa.array([f"v{seed}-{i}" for i in range(rows)], pa.string()),
                             "my_col_2": pa.array([i / 2 for i in range(rows)], pa.float64())}), sink)
    return sink.getvalue()


def _service_for(service: Any, table: str, maintenance: dict[str, int]) -> Any:
    from wap_ingest.core.audits import suites_from

    suites = suites_from({"tables": {table: {"checks": [{"check": "not_null", "columns": ["my_col_1"]}],
                                             "maintenance": maintenance}}}, default_namespace="wap")
    return service.replaced(suites=suites)


def _metadata(service: Any, table: str) -> dict[str, int]:
    """The table's current metadata file on main: its size, and the lists in it that could grow with history."""
    from wap_ingest.adapters.engine.tables import IcebergTables
    from wap_ingest.core.models import TableRef

    current = IcebergTables(service.ports.writer.spark).iceberg_table(TableRef("wap", table), "main").operations(
    ).current()
    bucket, key = str(current.metadataFileLocation()).removeprefix("s3://").split("/", 1)
    return {"metadata_bytes": int(service.objects._s3.head_object(Bucket=bucket, Key=key)["ContentLength"]),
            "snapshots": int(current.snapshots().size()), "snapshot_log": int(current.snapshotLog().size()),
            "metadata_log": int(current.previousFiles().size())}


def _load(service: Any, table: str, i: int) -> float:
    bucket = _BUCKET[0]
    from wap_ingest.core.models import OutcomeStatus, SourceObject

    key = f"{table}/f{i:05}.parquet"
    service.objects._s3.put_object(Bucket=bucket, Key=key, Body=small_parquet(100, i * 100))
    started = time.perf_counter()
    outcome = service.ingest(SourceObject(bucket, key))
    elapsed = time.perf_counter() - started
    if outcome.status is not OutcomeStatus.PUBLISHED:
        raise RuntimeError(f"load {i} of {table}: {outcome.status.value}: {outcome.message}")
    return elapsed


def _lookup_s(service: Any, table: str, i: int, runs: int = 5) -> float:
    """The exactly-once lookup alone: the ledger entry of load `i` on main (median of `runs`)."""
    from wap_ingest.core.models import SourceObject, TableRef

    source = service.objects.head(_BUCKET[0], f"{table}/f{i:05}.parquet")
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        found = service.ports.catalog.find_published("main", TableRef("wap", table), [source.identity])
        samples.append(time.perf_counter() - started)
        if source.identity not in found:
            raise RuntimeError(f"{SourceObject(_BUCKET[0], source.key).uri} has no ledger entry on main")
    return statistics.median(samples)


def load_cost(service: Any, checkpoints: list[int], keep_snapshots: int) -> dict[str, Any]:
    """Loads into one table until each checkpoint; there, WINDOW loads into it alternate with WINDOW loads into a
    fresh table that has 9 loads behind it (its 10th to 14th), so both are timed the same way at the same moment
    (other work on the machine weighs on both): the ratio of their medians is the cost of the history."""
    table = f"history_{uuid.uuid4().hex[:8]}"
    svc = _service_for(service, table, {"keep_snapshots": keep_snapshots})
    done, points = 0, list[dict[str, Any]]()
    for checkpoint in checkpoints:
        while done < checkpoint - 1:
            done += 1
            _load(svc, table, done)
        young = f"young_{uuid.uuid4().hex[:8]}"
        fresh = _service_for(service, young, {"keep_snapshots": keep_snapshots})
        for i in range(1, 10):
            _load(fresh, young, i)
        old_s, young_s = [], []
        for i in range(WINDOW):
            done += 1
            old_s.append(_load(svc, table, done))
            young_s.append(_load(fresh, young, 10 + i))
        point = {"loads": checkpoint, "load_median_s": round(statistics.median(old_s), 3),
                 "tenth_load_median_s": round(statistics.median(young_s), 3),
                 "vs_tenth": round(statistics.median(old_s) / statistics.median(young_s), 3),
                 "load_samples_s": [round(t, 3) for t in old_s], "tenth_samples_s": [round(t, 3) for t in young_s],
                 **_metadata(svc, table), "ledger_lookup_s": round(_lookup_s(svc, table, 1), 4)}
        points.append(point)
        print(json.dumps({"keep_snapshots": keep_snapshots, **point}), flush=True)
    first, last = points[0], points[-1]
    return {"table": f"wap.{table}", "keep_snapshots": keep_snapshots, "checkpoints": points,
            "last_vs_tenth_load": last["vs_tenth"],
            "last_vs_first_metadata": round(last["metadata_bytes"] / first["metadata_bytes"], 3),
            "last_vs_first_ledger_lookup": round(last["ledger_lookup_s"] / first["ledger_lookup_s"], 3)}


def checksum(spark: Any, table: str) -> tuple[int, int]:
    """The rows of wap.<table> and a checksum of all of them (main as it is now: the session caches tables)."""
    spark.catalog.refreshTable(f"nessie.wap.{table}")
    row = spark.sql(f"SELECT count(*) AS n, sum(xxhash64(my_col_0, my_col_1, my_col_2)) AS h "
                    f"FROM nessie.wap.{table}").collect()[0]
    return int(row["n"]), int(row["h"])


def full_scan_s(spark: Any, table: str, runs: int = 3) -> float:
    """The best of `runs` full scans of every column of wap.<table> (a fresh plan each time)."""
    best = float("inf")
    spark.catalog.refreshTable(f"nessie.wap.{table}")  # main as it is now (the session's catalog caches tables)
    for _ in range(runs):
        started = time.perf_counter()
        spark.sql(f"SELECT sum(length(my_col_1)), sum(my_col_2), max(my_col_0) FROM nessie.wap.{table}").collect()
        best = min(best, time.perf_counter() - started)
    return best


def compaction(service: Any, files: int) -> dict[str, Any]:
    from wap_ingest.core.maintenance import MaintenanceReport
    from wap_ingest.core.models import TableRef

    table = f"compaction_{uuid.uuid4().hex[:8]}"
    svc = _service_for(service, table, {"min_input_files": 5})
    for i in range(files):
        _load(svc, table, i)
    spark = svc.ports.writer.spark
    before_sum, scan_before = checksum(spark, table), full_scan_s(spark, table)
    started = time.perf_counter()
    (report,) = svc.maintain(TableRef("wap", table))
    maintain_s = time.perf_counter() - started
    if not isinstance(report, MaintenanceReport):
        raise RuntimeError(f"maintaining {table}: {report}")
    after_sum, scan_after = checksum(spark, table), full_scan_s(spark, table)
    return {"table": f"wap.{table}", "files": files, "maintain_s": round(maintain_s, 3), "report": report.to_dict(),
            "rows_and_checksum_before": list(before_sum), "rows_and_checksum_after": list(after_sum),
            "same_rows": before_sum == after_sum, "full_scan_before_s": round(scan_before, 3),
            "full_scan_after_s": round(scan_after, 3), "full_scan_after_vs_before": round(scan_after / scan_before, 3)}


def run(service: Any, checkpoints: list[int], unbounded: bool, compaction_files: int, bucket: str = INBOX
        ) -> dict[str, Any]:
    """The workload on a running stack's service, its files in `bucket` (benchmarks.run registers it as workload
    6). `last_load_median_s` / `tenth_load_median_s`: the last checkpoint's pair, the target's raw figures."""
    _BUCKET[0] = bucket  # an existing source bucket of the service
    warm = f"warmup_{uuid.uuid4().hex[:8]}"  # the engine's start and first jobs are not the history's cost
    for i in range(WINDOW):
        _load(_service_for(service, warm, {}), warm, i)
    results: dict[str, Any] = {"bounded": load_cost(service, checkpoints, keep_snapshots=50)}
    if unbounded:
        results["unbounded"] = load_cost(service, checkpoints, keep_snapshots=100_000)
    if compaction_files:
        results["compaction"] = compaction(service, compaction_files)
    last = results["bounded"]["checkpoints"][-1]
    results |= {"last_loads": last["loads"], "last_load_median_s": last["load_median_s"],
                "tenth_load_median_s": last["tenth_load_median_s"]}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--loads", default="10,100,1000", help="checkpoints (default 10,100,1000)")
    parser.add_argument("--unbounded", action="store_true", help="also without the snapshot trim")
    parser.add_argument("--compaction-files", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import os

    from wap_ingest.bootstrap import build_service
    from wap_ingest.bootstrap.config import Settings
    from wap_stack.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-history-")), moto_port=moto,
                         nessie_port=nessie, nessie_management_port=mgmt, slack_port=slack, lambda_port=function,
                         runtime_port=runtime)
    state = start_stack(config)
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "work"),
                                                               "WAP_SOURCE_BUCKETS": INBOX}
        os.environ.update(env)
        service = build_service(Settings.from_env(env))
        service.objects._s3.create_bucket(Bucket=INBOX)
        started = time.perf_counter()
        results = run(service, sorted(int(n) for n in args.loads.split(",")), args.unbounded, args.compaction_files)
        results["seconds"] = round(time.perf_counter() - started, 1)
    finally:
        stop_stack(config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "history.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
