"""Workload 8: bursts of small files through the stack's real event path, at 300 and at 2,000 files, in one run.

    python -m benchmarks.queue_burst [--sizes 300,2000] [--tables 6] [--rows 1000] [--workers 1]
        [--out benchmarks/results/queue_burst.json]

Standalone it starts its own local stack (as benchmarks/run.py does; `python -m benchmarks.run --workloads 8` runs
the same on the bench's stack). For each size N, on fresh tables (`qb<N>_0` ... `qb<N>_<tables-1>`, the stack's
default suite), one warm-up file per table first (it creates the table; untimed), then N files of `rows` rows each,
spread over the tables, are put into the source bucket by 8 threads, as producers drop them: S3's notification ->
the queue server behind moto's endpoint (ElasticMQ, wap_stack/queue.py) -> the worker(s) -> the function under the
Lambda emulator. Timed from the first put to the last of the N files published, as the worker logged it. Reported
per size: files per second, how long the puts took, the batches the function was handed (count, mean size) and how
busy it was (the sum of its invocations' seconds over the wall time: near 1, the queue keeps up; the rest is the
function waiting on the queue). Then checked: each file published exactly once (one `published` outcome per key, no
other), the rows on main of each table (read by PyIceberg through Nessie's Iceberg REST endpoint) exactly its files
times `rows`, and the dead-letter queue empty. `ratio` is the rate at the largest size over the rate at the smallest
(the issue's target: 2,000 files at no less than 80% of the 300-file rate). Before ElasticMQ, on moto's SQS, whose
ReceiveMessage cost grows with the queue's depth, issue 34 measured 9.3 files/s at 300 files and 4.9 at 1,800.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SIZES = (300, 2000)
TABLES = 6
ROWS = 1000
PUT_THREADS = 8
RESULT = Path(__file__).resolve().parent / "results" / "queue_burst.json"


def body(rows: int, seed: int) -> bytes:
    table = pa.table({"my_col_0": pa.array(range(seed * rows, (seed + 1) * rows), pa.int64()),
                      "my_col_1": pa.array([f"v{i}" for i in range(rows)], pa.string())})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


class Stack:
    """The stack's endpoints (from `wap stack env`'s variables) and what its workers logged."""

    def __init__(self, env: Mapping[str, str]) -> None:
        import boto3

        self.env = dict(env)
        keys = {"aws_access_key_id": env.get("AWS_ACCESS_KEY_ID", "testing"),
                "aws_secret_access_key": env.get("AWS_SECRET_ACCESS_KEY", "testing")}
        self.region = env.get("AWS_REGION", "us-east-1")
        self.s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=self.region, **keys)
        self.sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=self.region, **keys)
        self.logs = Path(env["WAP_STACK_DIR"]) / "logs"

    def batches(self) -> list[dict[str, Any]]:
        """Every batch every worker logged (`worker.log`, `worker-2.log`, ...)."""
        found = []
        for log in sorted(self.logs.glob("worker*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("{") and '"event": "batch"' in line:
                    found.append(json.loads(line))
        return found

    def outcomes(self, keys: set[str]) -> dict[str, list[str]]:
        """{key: [statuses, in the order logged]} for the keys of `keys` that have an outcome."""
        bucket = f"s3://{self.env['SOURCE_BUCKET']}/"
        found: dict[str, list[str]] = {}
        for batch in self.batches():
            for outcome in batch.get("objects") or ():
                key = str(outcome.get("object", "")).removeprefix(bucket)
                if key in keys:
                    found.setdefault(key, []).append(str(outcome.get("status")))
        return found

    def dead_letters(self) -> int:
        url = self.env["WAP_STACK_DLQ_URL"]
        attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def rows_on_main(self, table: str) -> int:
        from pyiceberg.catalog import load_catalog

        catalog = load_catalog("nessie", type="rest", uri=f"{self.env['NESSIE_ENDPOINT']}/iceberg/main",
                               **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
                                  "s3.endpoint": self.env["AWS_ENDPOINT_URL"], "s3.region": self.region,
                                  "s3.access-key-id": self.env.get("AWS_ACCESS_KEY_ID", "testing"),
                                  "s3.secret-access-key": self.env.get("AWS_SECRET_ACCESS_KEY", "testing")})
        loaded = catalog.load_table(f"{self.env.get('WAP_NAMESPACE', 'wap')}.{table}")
        return int(loaded.scan(selected_fields=("my_col_0",)).to_arrow().num_rows)

    def put_all(self, files: list[tuple[str, bytes]]) -> float:
        bucket = self.env["SOURCE_BUCKET"]
        started = time.perf_counter()
        with ThreadPoolExecutor(PUT_THREADS) as pool:
            list(pool.map(lambda item: self.s3.put_object(Bucket=bucket, Key=item[0], Body=item[1]), files))
        return time.perf_counter() - started

    def wait_published(self, keys: set[str], timeout: float) -> float:
        """Seconds (from now) until every key has an outcome; TimeoutError naming how many did not."""
        started = time.perf_counter()
        while len(self.outcomes(keys)) < len(keys):
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{len(keys) - len(self.outcomes(keys))} of {len(keys)} files never settled")
            time.sleep(0.2)
        return time.perf_counter() - started


def burst(stack: Stack, size: int, tables: int, rows: int, log: Callable[[str], None]) -> dict[str, Any]:
    names = [f"qb{size}_{t}" for t in range(tables)]
    warm = [(f"{name}/warm.parquet", body(rows, 10**7 + t)) for t, name in enumerate(names)]
    stack.put_all(warm)
    stack.wait_published({key for key, _ in warm}, timeout=600)
    files = [(f"{names[i % tables]}/f{i:05d}.parquet", body(rows, i)) for i in range(size)]
    keys = {key for key, _ in files}
    seen = len(stack.batches())
    log(f"burst of {size} files over {tables} tables ...")
    began, wall_began = time.perf_counter(), time.time()
    put_seconds = stack.put_all(files)
    stack.wait_published(keys, timeout=3600)
    seconds = time.perf_counter() - began
    batches = [b for b in stack.batches()[seen:] if b.get("objects")]
    busy = sum(float(b.get("seconds") or 0) for b in batches)
    outcomes = stack.outcomes(keys)
    not_once = {k: v for k, v in outcomes.items() if v != ["published"]}
    expected = {name: (sum(1 for key in keys if key.startswith(f"{name}/")) + 1) * rows for name in names}
    found = {name: stack.rows_on_main(name) for name in names}
    result = {
        "files": size, "tables": tables, "rows_per_file": rows, "seconds": round(seconds, 2),
        "files_per_s": round(size / seconds, 2), "put_seconds": round(put_seconds, 2),
        "batches": len(batches), "mean_batch": round(sum(int(b["messages"]) for b in batches) / max(len(batches), 1),
                                                     1),
        "function_busy_s": round(busy, 2), "function_busy_fraction": round(busy / seconds, 3),
        "published_once": not not_once, "not_once": dict(list(not_once.items())[:10]),
        "rows_on_main": found, "rows_expected": expected, "rows_exact": found == expected,
        "started_at": datetime.fromtimestamp(wall_began, UTC).isoformat(timespec="seconds"),
    }
    log(f"  {size} files: {result['files_per_s']} files/s in {result['seconds']} s (puts {result['put_seconds']} s), "
        f"{result['batches']} batches of {result['mean_batch']} on average, function busy "
        f"{result['function_busy_fraction']:.0%}; published once: {result['published_once']}, rows exact: "
        f"{result['rows_exact']}")
    return result


def measure(env: Mapping[str, str], sizes: tuple[int, ...] = SIZES, tables: int = TABLES, rows: int = ROWS,
            log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> dict[str, Any]:
    stack = Stack(env)
    by_size: dict[str, Any] = {}
    for size in sizes:
        load = os.getloadavg()[0]
        by_size[str(size)] = burst(stack, size, tables, rows, log) | {
            "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}
    smallest, largest = by_size[str(min(sizes))], by_size[str(max(sizes))]
    return {"sizes": list(sizes), "by_size": by_size, "dead_letters": stack.dead_letters(),
            "ratio": round(largest["files_per_s"] / smallest["files_per_s"], 3),
            "every_row_once": all(r["published_once"] and r["rows_exact"] for r in by_size.values())}


def run(bench: Any) -> dict[str, Any]:
    """Workload 8 of benchmarks/run.py, on the bench's stack (its environment names the stack's folder)."""
    sizes = (3, 6) if bench.options.smoke else SIZES
    return measure(bench.env, sizes, tables=2 if bench.options.smoke else TABLES, rows=10 if bench.options.smoke
                   else ROWS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--tables", type=int, default=TABLES)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--workers", type=int, default=1, help="execution environments of the stack")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    from wap_stack.stack import StackConfig, free_port_block, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack = free_ports(4)
    function = free_port_block(2 * args.workers, avoid=(moto, nessie, mgmt, slack))
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-queue-burst-")), moto_port=moto,
                         nessie_port=nessie, nessie_management_port=mgmt, slack_port=slack, lambda_port=function,
                         runtime_port=function + 1, workers=args.workers)
    started_at, load = datetime.now(UTC).isoformat(timespec="seconds"), os.getloadavg()
    state = start_stack(config)
    try:
        results = measure(stack_environment(state), sizes, args.tables, args.rows)
    finally:
        stop_stack(config)
        shutil.rmtree(config.state_dir, ignore_errors=True)
    report = {"started_at": started_at, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "load_average_before": [round(x, 2) for x in load], "load_average_after":
              [round(x, 2) for x in os.getloadavg()], "workers": args.workers,
              "queue": "ElasticMQ behind moto's endpoint (wap_stack/queue.py, wap_stack/moto_queue.py)",
              "before_on_moto_sqs": {"source": "issue 34", "300_files_per_s": 9.3, "1800_files_per_s": 4.9},
              **results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("ratio", "every_row_once", "dead_letters")} | {
        size: {k: v[k] for k in ("files_per_s", "seconds", "function_busy_fraction")}
        for size, v in report["by_size"].items()}, indent=2))
    return 0 if report["every_row_once"] and report["dead_letters"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
