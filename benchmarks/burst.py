"""Workload 3: a burst of small files (1,000 rows each) for one table, both sides at the same concurrency.

At each concurrency C (1 and 4) the files are already in S3 and are split into C streams, one thread each:
- service, direct: each thread calls `service.ingest_all` with batches of its files as the event source mapping
  delivers them (up to `--burst-batch`: serverless.yml's batchSize, 100); a batch is one branch, one write, an
  audit per file, one merge; a merge conflict with another thread is retried from `main` by the pipeline itself;
- baseline: each thread runs the reference on its files one by one; the reference has no retry, so a file whose
  merge conflicts with another thread's is run again from `main` (counted as `conflicts`).
Timed from the first call to the last file on `main`. The service's event path (S3 -> SQS -> worker -> the one
local function) is run once more, at the stack's own concurrency, for reference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.baseline import MergeConflictError
from benchmarks.common import INBOX, Bench

ROWS = 1_000


def _streams(keys: list[str], concurrency: int) -> list[list[str]]:
    return [keys[i::concurrency] for i in range(concurrency)]


def service_direct(bench: Bench, files: int, concurrency: int) -> dict[str, Any]:
    from wap_ingest.core.ingest import Item
    from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject

    table, batch = f"bench_burst_c{concurrency}", bench.options.burst_batch

    def ingest(keys: list[str]) -> int:
        for result in bench.service.ingest_all([Item(SourceObject(INBOX, key)) for key in keys]):
            if not isinstance(result, IngestOutcome) or result.status is not OutcomeStatus.PUBLISHED:
                raise RuntimeError(f"the service did not publish a burst file: {result}")
        return len(keys)

    def stream(mine: list[str]) -> int:
        return sum(ingest(mine[start:start + batch]) for start in range(0, len(mine), batch))

    found = _burst(bench, table, files, concurrency, stream)
    if found.pop("returned") != files:
        raise RuntimeError(f"{table}: the service settled fewer files than the burst's {files}")
    return found | {"batch": batch}


def baseline(bench: Bench, files: int, concurrency: int) -> dict[str, Any]:
    table = f"baseline_burst_c{concurrency}"

    def stream(mine: list[str]) -> int:
        client, conflicts = bench.baseline(), 0
        for key in mine:
            while True:
                try:
                    client.ingest(INBOX, key, f"wap.{table}")
                    break
                except MergeConflictError:
                    conflicts += 1
        return conflicts

    found = _burst(bench, table, files, concurrency, stream)
    return found | {"merges": found["files"], "conflicts": found.pop("returned")}


def _burst(bench: Bench, table: str, files: int, concurrency: int, stream: Callable[[list[str]], int]
           ) -> dict[str, Any]:
    """Put the files, a warm-up file first (it creates the table, untimed), then time the streams."""
    warm_key = f"{table}/warm.parquet"
    keys = [f"{table}/f{i:04d}.parquet" for i in range(files)]
    for key in [warm_key, *keys]:
        bench.put(INBOX, key, ROWS)
    stream([warm_key])
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        returned = sum(pool.map(stream, _streams(keys, concurrency)))
    seconds = time.perf_counter() - started
    merges = sum(1 for found in bench.merges_on_main(table) if found & set(keys))
    return {"files": files, "seconds": round(seconds, 3), "files_per_minute": round(files / seconds * 60, 1),
            "merges": merges, "returned": returned}


def event_path(bench: Bench, files: int) -> dict[str, Any]:
    table = "bench_burst_event"
    warm_key = f"{table}/warm.parquet"  # the function's warm-up, as on the other side
    bench.put(bench.env["SOURCE_BUCKET"], warm_key, ROWS)
    bench.wait_on_main(table, {warm_key})
    keys = {f"{table}/f{i:04d}.parquet" for i in range(files)}
    started = time.perf_counter()
    for key in sorted(keys):
        bench.put(bench.env["SOURCE_BUCKET"], key, ROWS)
    bench.wait_on_main(table, keys)
    seconds = time.perf_counter() - started
    merges = sum(1 for found in bench.merges_on_main(table) if found & keys)
    return {"files": files, "seconds": round(seconds, 3), "files_per_minute": round(files / seconds * 60, 1),
            "merges": merges}


def run(bench: Bench) -> dict[str, Any]:
    files = bench.options.burst
    out: dict[str, Any] = {"files": files, "by_concurrency": {}}
    for concurrency in bench.options.concurrency:
        service = service_direct(bench, files, concurrency)
        reference = baseline(bench, files, concurrency)
        out["by_concurrency"][str(concurrency)] = {
            "service_direct": service, "baseline": reference,
            "ratio": round(service["files_per_minute"] / reference["files_per_minute"], 2)}
    out["service_event_path"] = event_path(bench, files)
    return out
