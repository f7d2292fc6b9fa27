"""Workload 2: what the audit of a 1,000-row append costs as the table grows (10k, 1M, 10M rows, written by Spark
with Iceberg's default metrics).

Both sides append the same file to the table on a branch of their own, then only the audit is timed:
- service: `measure_appended` with the not_null plan on my_col_1 (the new snapshot's files and their metrics);
- baseline: the reference's check as written, a scan of the whole table on the branch with `IsNull(my_col_1)`
  as row filter (PyIceberg plans every manifest and skips the files whose null count is 0).
Issue 36's cost, timed the same way, interleaved, in the same run on the same tables (the file's append untimed):
each arm (SUITES) is the audit as the pipeline makes it, the metric history read from the table's results on main
(HISTORY earlier loads recorded there first, and one more before each audit, as a stream of loads leaves it), the
measurement, the verdict and the results' append on the branch, each step's median kept (`stages_median_s`). As in
the pipeline (core.history.history_beside), the history read starts before the file's append and runs beside it:
the timed `history` step is what is left of it once the file is appended. The earlier loads are recorded by the
service's own adapter, as a warm function's own stream of loads leaves them: their rows are known to it (another
process's loads are read file by file: tests/contract/test_audit_results_contract.py).
- recorded: the not_null suite (answered by the files' metrics, no row read), its rows recorded as every load's are;
- learning_metadata: + anomaly checks on row_count and null_share(my_col_1) (the metrics answer them too);
- learning: + an anomaly check on mean(my_col_2), whose profile needs the rows: the first row read of the audit;
- pass: not_null and a regex check, which reads the rows (one pass);
- pass_learning: the same + the three anomaly checks, the profile in the same pass.
Target (issue 36): pass_learning <= 1.3 x pass, the profile and anomaly checks added to an audit that reads the rows
anyway; the other ratios are reported beside it (benchmarks/results/audit_learning.json, README).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.common import INBOX, SMALL_COLUMN, Bench, summary

HISTORY = 20  # earlier loads in each table's results on main (the anomaly checks' history)
NOT_NULL = {"check": "not_null", "columns": [SMALL_COLUMN]}
PASS = {"check": "regex", "column": SMALL_COLUMN, "pattern": "v[0-9]+"}  # a check that reads the rows
WATCHED = [{"check": "anomaly", "metric": "row_count", "min_loads": 5},
           {"check": "anomaly", "metric": f"null_share({SMALL_COLUMN})", "min_loads": 5}]  # the metadata answers them
PROFILED = {"check": "anomaly", "metric": "mean(my_col_2)", "min_loads": 5}  # a profile: the rows are read
SUITES = {  # each arm's checks (the arm's timings: service_audit_<arm>)
    "recorded": [NOT_NULL],
    "learning_metadata": [NOT_NULL, *WATCHED],
    "learning": [NOT_NULL, *WATCHED, PROFILED],
    "pass": [NOT_NULL, PASS],
    "pass_learning": [NOT_NULL, PASS, *WATCHED, PROFILED],
}


def run(bench: Bench) -> dict[str, Any]:
    from wap_ingest.core.audit_results import rows_for
    from wap_ingest.core.audits import NotNull, audit, suites_from
    from wap_ingest.core.branches import RunKind, run_branch_name
    from wap_ingest.core.history import history_beside
    from wap_ingest.core.measurements import MeasurementPlan
    from wap_ingest.core.models import FileFormat, SourceObject, TableRef
    from wap_ingest.core.ports import WriteSpec

    sizes = [1_000, 2_000] if bench.options.smoke else [10_000, 1_000_000, 10_000_000]
    catalog, writer = bench.service.ports.catalog, bench.service.ports.writer
    assert bench.service.engine is not None
    spark = bench.service.engine.session()
    catalog.ensure_namespace("main", "bench")
    catalog.ensure_namespace("main", "wap_meta")  # the history recorded straight on main below
    baseline = bench.baseline()
    results = bench.service.audit_results
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

        suites = {arm: suites_from({"tables": {table.qualified: checks}}, default_namespace="wap").suite_for(table)
                  for arm, checks in SUITES.items()}
        for load in range(HISTORY):
            record_load(bench, table, load)
        loads = itertools.count(HISTORY)  # the published loads recorded on main next, one before each audit
        stages: dict[str, dict[str, list[float]]] = {arm: {} for arm in SUITES}

        def judged(arm: str, table: TableRef = table, source: SourceObject = source, suites: dict[str, Any] = suites,
                   stages: dict[str, dict[str, list[float]]] = stages, loads: Iterator[int] = loads) -> float:
            """The audit as the pipeline makes it: the history read, the measurement, the verdict and the results'
            append (the append of the file itself untimed); each step's time kept in `stages`."""
            suite = suites[arm]
            record_load(bench, table, next(loads))  # untimed: one more published load on main since the last
            # audit, as a stream of loads of one table leaves it (the history read takes in that load's file)
            name = run_branch_name(RunKind.FILE, table, source.identity, started=time.time(), default_namespace="wap")
            branch = catalog.create_branch(name, catalog.reference_hash("main"))
            history = history_beside(suite, table, catalog, "main", results)  # as the pipeline: beside the write
            appended = writer.append(WriteSpec(table, branch.name, MeasurementPlan()), source,
                                     FileFormat.PARQUET).snapshot
            assert appended is not None
            marks = [time.perf_counter()]
            context = history()  # what is left of the read after the write
            marks.append(time.perf_counter())
            measured = writer.measure_appended(table, branch.name, appended, suite.plan())
            marks.append(time.perf_counter())
            report = audit(suite, table, measured, context)
            results.record(branch.name, table, rows_for(table, source, report, measured, branch.name,
                                                        datetime.now(UTC)))
            marks.append(time.perf_counter())
            assert report.passed, report
            for step, (a, b) in zip(("history", "measure", "judge_and_record"), itertools.pairwise(marks),
                                    strict=True):
                stages[arm].setdefault(step, []).append(b - a)
            catalog.delete_branch(type(branch)(branch.name, catalog.reference_hash(branch.name)))
            return marks[-1] - marks[0]

        service_audit()  # the warm-ups
        baseline_audit()
        for arm in SUITES:
            judged(arm)
        for steps in stages.values():  # the warm-ups' steps are not counted
            steps.clear()
        timings: dict[str, list[float]] = {"service_audit": [], "baseline_reference_audit": [],
                                           **{f"service_audit_{arm}": [] for arm in SUITES}}
        for _ in range(bench.options.runs):  # interleaved: the machine's noise falls on every arm alike
            timings["service_audit"].append(service_audit())
            for arm in SUITES:
                timings[f"service_audit_{arm}"].append(judged(arm))
            timings["baseline_reference_audit"].append(baseline_audit())
        out[str(size)] = {name: summary(values) for name, values in timings.items()} | {"stages_median_s": {
            arm: {step: round(statistics.median(values), 3) for step, values in steps.items()}
            for arm, steps in stages.items()}}
    return out


def record_load(bench: Bench, table: Any, load: int) -> None:
    """One earlier load's results on main, as a published load leaves them (the values vary a little)."""
    from wap_ingest.core.audit_results import rows_for
    from wap_ingest.core.measurements import ColumnProfile, Measurements
    from wap_ingest.core.models import AuditReport, SourceObject

    measured = Measurements(row_count=1000, null_counts={SMALL_COLUMN: 0}, columns=(SMALL_COLUMN, "my_col_2"),
                            profile={"my_col_2": ColumnProfile(0.0, 1000.0, 0.0, 499.5, 249.75 + load % 3)})
    earlier = SourceObject(INBOX, f"audit/history-{load}.parquet", etag=f"e{load}")
    report = AuditReport(table.qualified, 1000, ())
    bench.service.audit_results.record("main", table, rows_for(table, earlier, report, measured, "main",
                                                               datetime.now(UTC) - timedelta(minutes=1)))
