"""Workload 2: what the audit of a 1,000-row append costs as the table grows (10k, 1M, 10M rows, written by Spark
with Iceberg's default metrics).

Both sides append the same file to the table on a branch of their own, then only the audit is timed:
- service: `measure_appended` with the not_null plan on my_col_1 (the new snapshot's files and their metrics);
- baseline: the reference's check as written, a scan of the whole table on the branch with `IsNull(my_col_1)`
  as row filter (PyIceberg plans every manifest and skips the files whose null count is 0).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import INBOX, SMALL_COLUMN, Bench, median_of


def run(bench: Bench) -> dict[str, Any]:
    from wap_ingest.core.audits import NotNull
    from wap_ingest.core.branches import RunKind, run_branch_name
    from wap_ingest.core.measurements import MeasurementPlan
    from wap_ingest.core.models import FileFormat, SourceObject, TableRef
    from wap_ingest.core.ports import WriteSpec

    sizes = [1_000, 2_000] if bench.options.smoke else [10_000, 1_000_000, 10_000_000]
    catalog, writer = bench.service.ports.catalog, bench.service.ports.writer
    assert bench.service.engine is not None
    spark = bench.service.engine.session()
    catalog.ensure_namespace("main", "bench")
    baseline = bench.baseline()
    out: dict[str, Any] = {}
    for size in sizes:
        table = TableRef("bench", f"audit_{size}")
        spark.range(size).selectExpr("cast(id % 2147483647 as int) as my_col_0", f"concat('v', id) as {SMALL_COLUMN}",
                                     "cast(id as double) / 2 as my_col_2").writeTo(f"nessie.{table.qualified}").create()
        key = f"audit/{size}.parquet"
        bench.put(INBOX, key, 1000)
        source = SourceObject(INBOX, key)
        data = baseline.read(INBOX, key)

        def service_audit(table: TableRef = table, source: SourceObject = source) -> float:
            name = run_branch_name(RunKind.FILE, table, source.identity, started=time.time(), default_namespace="wap")
            branch = catalog.create_branch(name, catalog.reference_hash("main"))
            appended = writer.append(WriteSpec(table, branch.name, MeasurementPlan()), source,
                                     FileFormat.PARQUET).snapshot
            assert appended is not None
            started = time.perf_counter()
            writer.measure_appended(table, branch.name, appended, NotNull((SMALL_COLUMN,)).plan())
            elapsed = time.perf_counter() - started
            catalog.delete_branch(type(branch)(branch.name, catalog.reference_hash(branch.name)))
            return elapsed

        def baseline_audit(table: TableRef = table, data: Any = data) -> float:
            head = baseline.nessie.get_reference("main")
            branch = baseline.nessie.create_branch(f"baseline-audit-{time.time_ns()}", ref="main",
                                                   hash_on_ref=head.hash_)
            baseline.append(branch.name, table.qualified, data)
            started = time.perf_counter()
            nulls = baseline.reference_audit(branch.name, table.qualified, SMALL_COLUMN)
            elapsed = time.perf_counter() - started
            baseline.nessie.delete_branch(branch.name, baseline.nessie.get_reference(branch.name).hash_)
            if nulls:
                raise RuntimeError(f"the reference's check found {nulls} nulls in {table}")
            return elapsed

        service_audit()  # the warm-ups
        baseline_audit()
        out[str(size)] = {"service_audit": median_of(bench.options.runs, service_audit),
                          "baseline_reference_audit": median_of(bench.options.runs, baseline_audit)}
    return out
