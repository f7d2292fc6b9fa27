"""Audits that learn from what was published (issue 36), through the real stack (moto S3, Nessie, the service's
PyIceberg commits and Spark): twenty generated loads of a table are published, a twenty-first whose null share of
one column is ten times the usual is rejected with an alert that gives the value, the band and the threshold; the
results table on `main`, read with PyIceberg through Nessie's Iceberg REST endpoint, holds exactly the published
loads' rows, and the rejected load's rows are only on its branch; an order whose customer is unknown is rejected by
`references`."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog

from tests.conftest import Lake
from tests.integration.core.audits.test_audit_suites import RecordingNotifier, run, suites
from wap_ingest.core.audit_results import results_table
from wap_ingest.core.audits import suites_from
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import CheckStatus, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]

ROWS = 200


def emails(nulls: int, seed: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({
        "id": pa.array([seed * ROWS + i for i in range(ROWS)], pa.int64()),
        "email": pa.array([None if i < nulls else f"u{seed}_{i}@example.com" for i in range(ROWS)], pa.string()),
        "amount": pa.array([float((i * 7 + seed) % 100) for i in range(ROWS)], pa.float64()),
    }), sink)
    return sink.getvalue()


def main_rows(lake: Lake, table: TableRef, ref: str = "main") -> pa.Table:
    catalog = load_catalog("nessie", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/{ref}",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    return catalog.load_table(results_table(table).qualified).scan().to_arrow()


def test_twenty_loads_then_a_shifted_one_rejected_and_the_results_table_on_main_is_the_published_loads(
        lake: Lake, table_name: str) -> None:
    table = TableRef("wap", table_name)
    audits = suites(table_name, [
        {"check": "anomaly", "metric": "null_share(email)", "last": 30, "min_loads": 5, "threshold": 4},
    ])  # the pages' null counts answer it: each fitting file is registered, with no Spark job
    published = []
    for load in range(20):
        source = lake.put(f"{table_name}/load-{load:02d}.parquet", emails(4 + load % 3, load))  # 2% to 3% nulls
        outcome = run(lake, source, audits)
        assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
        published.append(outcome)
    notifier = RecordingNotifier()
    shifted = run(lake, lake.put(f"{table_name}/shifted.parquet", emails(50, 99)), audits, notifier)  # 25%

    assert shifted.status is OutcomeStatus.REJECTED and shifted.report is not None and shifted.branch
    result = next(c for c in shifted.report.checks if c.target == "null_share(email)")
    assert result.status is CheckStatus.FAILED
    assert "null_share(email) = 0.25" in result.measured and "from the median 0.025" in result.measured
    assert "4 x MAD x 1.4826" in result.expected and "last 20 loads" in result.expected
    [alert] = notifier.alerts
    assert "null_share(email) = 0.25" in alert.text and "between " in alert.text and "MAD" in alert.text

    on_main = main_rows(lake, table)
    loads = set(on_main.column("load").to_pylist())
    assert loads == {o.source.identity for o in published}  # exactly the published loads, not the rejected one
    metrics = [r for r in on_main.to_pylist() if r["check"] == "metric" and r["metric"] == "null_share(email)"]
    assert len(metrics) == 20 and all(0.015 < r["value"] < 0.035 for r in metrics)
    assert {r["verdict"] for r in on_main.to_pylist() if r["check"] == "anomaly"} == {"passed"}
    on_branch = [r for r in lake.service.audit_results.rows(table, shifted.branch)
                 if r.load == shifted.source.identity]
    assert ("anomaly", "null_share(email)", "failed") in {(r.check, r.target, r.verdict) for r in on_branch}
    spark = lake.service.ports.writer.spark  # any engine reads it: Spark through the Nessie catalog
    counted = spark.sql(f"SELECT count(DISTINCT load) AS n FROM nessie.{results_table(table).qualified}").collect()
    assert counted[0]["n"] == 20

    [report] = lake.service.maintain(results_table(table), here=True)  # kept compact like any table
    assert isinstance(report, MaintenanceReport) and report.status == "maintained", report
    assert report.before.data_files >= 20 and report.after is not None and report.after.data_files == 1
    assert main_rows(lake, table).num_rows == on_main.num_rows
    assert lake.service.audit_results.history(table, "main", {"null_share(email)": 30})["null_share(email)"] == tuple(
        r["value"] for r in sorted(metrics, key=lambda r: r["recorded_at"], reverse=True))


def test_an_order_with_an_unknown_customer_is_rejected_by_references(lake: Lake, table_name: str) -> None:
    customers, orders = f"{table_name}_customers", f"{table_name}_orders"
    audits = suites_from({"tables": {customers: [{"check": "unique", "columns": ["id"]}], orders: [
        {"check": "references", "column": "customer_id", "table": customers, "key": "id"}]}}, default_namespace="wap")

    def parquet(columns: dict[str, list[int | None]]) -> bytes:
        sink = io.BytesIO()
        pq.write_table(pa.table({k: pa.array(v, pa.int64()) for k, v in columns.items()}), sink)
        return sink.getvalue()

    made = run(lake, lake.put(f"{customers}/c.parquet", parquet({"id": list(range(100, 200))})), audits)
    assert made.status is OutcomeStatus.PUBLISHED, made.message
    good = run(lake, lake.put(f"{orders}/good.parquet", parquet({"order_id": [1, 2, 3],
                                                                 "customer_id": [100, 150, None]})), audits)
    assert good.status is OutcomeStatus.PUBLISHED, good.message
    bad = run(lake, lake.put(f"{orders}/bad.parquet", parquet({"order_id": [4, 5, 6],
                                                               "customer_id": [199, 200, 7]})), audits)
    assert bad.status is OutcomeStatus.REJECTED and bad.report is not None
    [failed] = bad.report.failures
    assert failed.measured == f"2 rows with a customer_id that is no id of wap.{customers}"
    assert sorted(s["customer_id"] for s in failed.samples) == ["200", "7"]
    assert lake.count(f"wap.{orders}") == 3


@pytest.mark.parametrize("write", ["register", "rewrite"])
def test_a_header_whose_total_disagrees_with_its_lines_is_rejected_by_reconcile(lake: Lake, table_name: str,
                                                                                 write: str) -> None:
    """Both write paths: the header's sum(total) after the load against the lines' sum(amount) (decimals), read by
    Spark from both tables on the run's branch."""
    lines, headers = f"{table_name}_lines", f"{table_name}_headers"
    audits = suites_from({"tables": {lines: [{"check": "row_count", "min": 1}], headers: {
        "write": write, "checks": [{"check": "reconcile", "aggregate": "sum(total)", "table": lines,
                                    "against": "sum(amount)", "tolerance": 0.001}]}}}, default_namespace="wap")

    def parquet(name: str, values: list[str]) -> bytes:
        import decimal

        sink = io.BytesIO()
        pq.write_table(pa.table({name: pa.array([decimal.Decimal(v) for v in values], pa.decimal128(10, 2))}), sink)
        return sink.getvalue()

    assert run(lake, lake.put(f"{lines}/a.parquet", parquet("amount", ["5.25", "7.50"])), audits).status \
        is OutcomeStatus.PUBLISHED
    good = run(lake, lake.put(f"{headers}/a.parquet", parquet("total", ["12.75"])), audits)
    assert good.status is OutcomeStatus.PUBLISHED, good.message
    bad = run(lake, lake.put(f"{headers}/b.parquet", parquet("total", ["0.01"])), audits)
    assert bad.status is OutcomeStatus.REJECTED and bad.report is not None
    [failed] = bad.report.failures
    assert failed.check == "reconcile" and failed.target == f"sum(total) = wap.{lines}.sum(amount)"
    assert failed.measured == f"sum(total) = 12.76, wap.{lines}'s sum(amount) = 12.75 (difference 0.01)"
    assert lake.count(f"wap.{headers}") == 1


def test_reconcile_takes_timestamps_as_seconds_and_refuses_a_text_column(lake: Lake, table_name: str) -> None:
    from datetime import UTC, datetime

    from wap_ingest.core.errors import AuditSuiteError

    copy, source = f"{table_name}_copy", f"{table_name}_source"
    checks = {copy: [{"check": "reconcile", "aggregate": "max(at)", "table": source, "against": "max(at)"}],
              source: [{"check": "row_count", "min": 1}]}

    def parquet(times: list[datetime], names: list[str]) -> bytes:
        sink = io.BytesIO()
        pq.write_table(pa.table({"at": pa.array(times, pa.timestamp("us", tz="UTC")), "name": names}), sink)
        return sink.getvalue()

    first, later = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC)
    audits = suites_from({"tables": checks}, default_namespace="wap")
    assert run(lake, lake.put(f"{source}/s.parquet", parquet([first, later], ["a", "b"])), audits).status \
        is OutcomeStatus.PUBLISHED
    same = run(lake, lake.put(f"{copy}/c.parquet", parquet([later], ["b"])), audits)
    assert same.status is OutcomeStatus.PUBLISHED, same.message
    behind = run(lake, lake.put(f"{copy}/d.parquet", parquet([first], ["a"])), audits)
    assert behind.status is OutcomeStatus.PUBLISHED  # the copy's max is still the later time
    text = suites_from({"tables": {copy: [{"check": "reconcile", "aggregate": "max(name)", "table": source,
                                           "against": "max(name)"}]}}, default_namespace="wap")
    with pytest.raises(AuditSuiteError, match=r"max\(name\) of wap\..*_copy is a string column"):
        run(lake, lake.put(f"{copy}/e.parquet", parquet([later], ["c"])), text)
    assert lake.count(f"wap.{copy}") == 2
