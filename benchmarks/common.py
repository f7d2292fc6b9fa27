"""What every workload shares: the options of the run, the service and the baseline on the stack (`Bench`), the
small files, medians, and the audit suites the bench's tables run with (the same check as the baseline's)."""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.baseline import Baseline
from benchmarks.flights import NOT_NULL_COLUMN

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]
INBOX = "bench-inbox"  # not notified: files for direct runs
SMALL_COLUMN = "my_col_1"  # the seed's checked column


@dataclass(frozen=True)
class Options:
    smoke: bool
    runs: int  # repetitions of a timed step (median)
    burst: int  # files per burst
    burst_batch: int  # files per call of the service's direct burst (a batch as the event source delivers)
    concurrency: tuple[int, ...]  # the burst's concurrencies, the same on both sides
    large_rows: int
    large_runs: int
    function_memory_mb: int
    work: Path  # scratch for the large file (removed after the run)


def bench_audits(options: Options) -> dict[str, Any]:
    """The suites of the service's bench tables: one not_null on the column the baseline checks, nothing else. Each
    table says how its Parquet files are written (issue 27): `bench_small`, `bench_small_event` and `bench_large_<n>`
    rewrite them (the figures measured before registration existed), `bench_small_register`,
    `bench_large_register_<n>` register them (and refuse a file they cannot register), `bench_gib_<path>_<n>` take the
    1 GiB file by each path; the others keep the default (auto: a fitting Parquet file is registered)."""
    small = [{"check": "not_null", "columns": [SMALL_COLUMN]}]
    large = [{"check": "not_null", "columns": [NOT_NULL_COLUMN]}]
    tables: dict[str, Any] = {name: small for name in ("bench_burst_event",)}
    tables |= {name: {"checks": small, "write": "rewrite"} for name in ("bench_small", "bench_small_event")}
    tables |= {"bench_small_register": {"checks": small, "write": "register"}}
    tables |= {f"bench_burst_c{c}": small for c in options.concurrency}
    tables |= {f"bench_large_{n}": {"checks": large, "write": "rewrite"} for n in range(options.large_runs)}
    tables |= {f"bench_large_register_{n}": {"checks": large, "write": "register"} for n in range(options.large_runs)}
    tables |= {f"bench_gib_{path}_{n}": {"checks": large, "write": path} for path in ("rewrite", "register")
               for n in range(options.large_runs)}
    return tables | {"bench_emr": large}


def write_audits(base: Path, target: Path, tables: Mapping[str, Any]) -> Path:
    """The audits file the stack runs with: `base` plus the bench tables' suites."""
    import yaml

    document = yaml.safe_load(base.read_text(encoding="utf-8")) or {}
    document.setdefault("tables", {}).update(tables)
    target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return target


def parquet_bytes(rows: int, seed: int = 0) -> bytes:
    table = pa.table({
        "my_col_0": pa.array([(i + seed) % 2**31 for i in range(rows)], pa.int32()),
        SMALL_COLUMN: pa.array([f"v{i}" for i in range(rows)], pa.string()),
        "my_col_2": pa.array([i / 2 for i in range(rows)], pa.float64()),
    })
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def published_keys(properties: Mapping[str, str]) -> set[str]:
    """The source keys one merge commit published (a file merged alone, or each file of a batch merge)."""
    from wap_ingest.core.lineage import published_files

    return {f.key for f in published_files(properties)}


def summary(samples: list[float]) -> dict[str, Any]:
    return {"median_s": round(statistics.median(samples), 3), "samples_s": [round(s, 3) for s in samples]}


def median_of(runs: int, measure: Callable[[], float]) -> dict[str, Any]:
    return summary([measure() for _ in range(runs)])


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


class Bench:
    """The service as the function wires it (in this process), its S3 client, and the stack's endpoints."""

    def __init__(self, env: dict[str, str], options: Options) -> None:
        from wap_ingest.bootstrap import build_service
        from wap_ingest.bootstrap.config import Settings

        self.env, self.options = env, options
        self.service = build_service(Settings.from_env(env))
        self.s3 = self.service.objects.client
        self.s3.create_bucket(Bucket=INBOX)
        self.shared: dict[str, Any] = {}  # what one workload prepares for a later one (the large file)

    def baseline(self) -> Baseline:
        """A fresh baseline client (one per thread)."""
        return Baseline(self.env["NESSIE_ENDPOINT"], self.env.get("AWS_ENDPOINT_URL"),
                        self.env.get("AWS_DEFAULT_REGION", "us-east-1"))

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
