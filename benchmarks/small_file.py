"""Workload 1: one small file (1,000 rows) to `main`, three ways in this one warm process, each after the same
warm-up (one untimed file of its own) and timed the same way (the call, from a file already in S3 to rows on
`main`), plus the service's event path, timed separately:

- service, direct: `service.ingest(source)` into a table that rewrites its files (`write: rewrite`): head, dedupe
  lookup, branch, download, Spark write, audit (not_null on my_col_1), merge;
- service, register: the same call into a table that registers them (`write: register`, issue 27): head, dedupe
  lookup, branch, the footer read, a server-side copy into the table's location, the Iceberg append of that file
  with its footer's metrics (no Spark job), the audit from those metrics, merge;
- baseline: the reference (benchmarks/baseline.py): pyarrow read, branch, PyIceberg append, row-filtered null
  scan (the same check), merge;
- engine alone: the same download, then plain Spark + Iceberg `writeTo(table).append()` on `main` in the
  service's own session: what WAP's safety costs on top of the engine is service direct minus this;
- service, event path: S3 notification -> SQS -> the stack's worker (0.25 s batching window) -> the Lambda
  runtime -> on `main`, polled every 0.05 s; its extra cost over the direct call is reported as its own figure.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from itertools import count
from pathlib import Path
from typing import Any

from benchmarks.common import INBOX, Bench, summary, timed

ROWS = 1_000


def plain_spark_append(bench: Bench, key: str, table: str, *, create: bool = False) -> None:
    """The engine alone: the file downloaded the service's way, read and appended to `main` by Spark + Iceberg."""
    service = bench.service
    assert service.engine is not None, "the service has no Spark engine"
    spark = service.engine.session()
    source = service.objects.head(INBOX, key)
    with tempfile.TemporaryDirectory(dir=bench.env.get("WAP_WORK_DIR")) as scratch:
        staged = service.objects.download(source, Path(scratch))
        writer = spark.read.parquet(str(staged)).writeTo(f"nessie.wap.{table}")
        writer.create() if create else writer.append()


def run(bench: Bench) -> dict[str, Any]:
    from wap_ingest.core.models import OutcomeStatus, SourceObject

    runs, numbers = bench.options.runs, count()
    stages: list[dict[str, float]] = []  # the service's seconds per pipeline stage, per file
    registered: list[dict[str, float]] = []  # the same, on the register path

    def direct() -> float:
        key = f"bench_small/f{next(numbers)}.parquet"
        bench.put(INBOX, key, ROWS)
        started = time.perf_counter()
        outcome = bench.service.ingest(SourceObject(INBOX, key))
        elapsed = time.perf_counter() - started
        if outcome.status is not OutcomeStatus.PUBLISHED or not outcome.report:
            raise RuntimeError(f"the service did not publish {key}: {outcome}")
        stages.append(dict(outcome.timings))
        return elapsed

    def register() -> float:
        key = f"bench_small_register/f{next(numbers)}.parquet"
        bench.put(INBOX, key, ROWS)
        started = time.perf_counter()
        outcome = bench.service.ingest(SourceObject(INBOX, key))
        elapsed = time.perf_counter() - started
        if outcome.status is not OutcomeStatus.PUBLISHED or "registered (" not in outcome.message:
            raise RuntimeError(f"the service did not register and publish {key}: {outcome}")
        registered.append(dict(outcome.timings))
        return elapsed

    def baseline() -> float:
        key = f"baseline_small/f{next(numbers)}.parquet"
        bench.put(INBOX, key, ROWS)
        return timed(lambda: client.ingest(INBOX, key, "wap.baseline_small"))

    def engine_alone() -> float:
        key = f"bench_plain/f{next(numbers)}.parquet"
        bench.put(INBOX, key, ROWS)
        return timed(lambda: plain_spark_append(bench, key, "bench_plain"))

    def event_path() -> float:
        key = f"bench_small_event/f{next(numbers)}.parquet"
        started = time.perf_counter()
        bench.put(bench.env["SOURCE_BUCKET"], key, ROWS)
        bench.wait_on_main("bench_small_event", {key})
        return time.perf_counter() - started

    client = bench.baseline()
    warm = {"service_direct": direct(), "service_register": register(), "baseline": baseline()}  # the warm-ups
    warm_plain_key = f"bench_plain/f{next(numbers)}.parquet"
    bench.put(INBOX, warm_plain_key, ROWS)
    warm["engine_alone"] = timed(lambda: plain_spark_append(bench, warm_plain_key, "bench_plain", create=True))
    warm["service_event_path"] = event_path()
    # Interleaved: each round times every way once, so a disturbance of the shared machine hits them alike.
    samples: dict[str, list[float]] = {name: [] for name in warm}
    ways = {"service_direct": direct, "service_register": register, "baseline": baseline,
            "engine_alone": engine_alone, "service_event_path": event_path}
    for _ in range(runs):
        for name, measure in ways.items():
            samples[name].append(measure())
    out: dict[str, Any] = {"rows": ROWS, "suite": "not_null my_col_1 (both sides)"}
    for name, values in samples.items():
        out[name] = {"warmup_s": round(warm[name], 3), "warm": summary(values)}
    for name, found in (("service_stages_median_s", stages[1:]), ("register_stages_median_s", registered[1:])):
        out[name] = {n: round(statistics.median(s.get(n, 0.0) for s in found), 3)  # not the warm-up's
                     for n in sorted({n for s in found for n in s})}
    direct_s, event_s = out["service_direct"]["warm"]["median_s"], out["service_event_path"]["warm"]["median_s"]
    out["event_path_extra_s"] = round(event_s - direct_s, 3)
    return out
