"""Every check type on purpose-built data through the real stack (moto S3, Nessie, Spark + Iceberg).

The session's Spark is shared: each test puts several checks in one suite, so one ingestion exercises them
together (as production does: one measurement pass per run)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake, parquet_bytes
from tests.fakes import run_one
from wap_ingest.core.alerts import Alert, AlertKind
from wap_ingest.core.audits import AuditSuites, suites_from
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.models import CheckStatus, IngestOutcome, OutcomeStatus, SourceObject
from wap_ingest.core.ports import Notifier
from wap_ingest.entrypoints.cli import main

pytestmark = [pytest.mark.stack, pytest.mark.spark]


class RecordingNotifier(Notifier):
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> bool:
        self.alerts.append(alert)
        return True


def table_bytes(columns: dict[str, pa.Array]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def orders(ids: list[int], *, names: list[str | None] | None = None, status: list[str] | None = None,
           amount: list[float] | None = None, code: list[str] | None = None, age: timedelta = timedelta(hours=1),
           ) -> bytes:
    n = len(ids)
    stamp = datetime.now(UTC) - age
    return table_bytes({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array(names or [f"n{i}" for i in ids], pa.string()),
        "status": pa.array(status or ["a", "b"] * (n // 2) + ["a"] * (n % 2), pa.string()),
        "amount": pa.array(amount or [float(i % 50) for i in range(n)], pa.float64()),
        "code": pa.array(code or ["ABC"] * n, pa.string()),
        "ts": pa.array([stamp - timedelta(minutes=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
    })


def suites(table: str, checks: list[dict[str, Any]]) -> AuditSuites:
    return suites_from({"tables": {table: checks}}, default_namespace="wap")


def run(lake: Lake, source: SourceObject, audits: AuditSuites, notifier: Notifier | None = None) -> IngestOutcome:
    svc = lake.service
    if notifier is None:
        return run_one(source, ports=svc.ports, suites=audits, config=svc.config)
    (result,) = ingest([Item(source)], ports=svc.ports, suites=audits, config=svc.config, notifier=notifier)
    assert isinstance(result, IngestOutcome), result
    return result


ROW_CHECKS: list[dict[str, Any]] = [
    {"check": "not_null", "columns": ["id", "name"]},
    {"check": "unique", "columns": ["id"]},
    {"check": "accepted_values", "column": "status", "values": ["a", "b"]},
    {"check": "range", "column": "amount", "min": 0, "max": 100},
    {"check": "regex", "column": "code", "pattern": "[A-Z]{3}"},
    {"check": "row_count", "min": 1, "max": 1000},
    {"check": "freshness", "column": "ts", "max_age": "24h"},
    {"check": "custom_sql", "name": "b orders over 90",
     "sql": "SELECT id, amount FROM new_rows WHERE status = 'b' AND amount > 90"},
]


def test_every_row_check_passes_on_clean_rows_then_fails_with_samples(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    audits = suites(table_name, ROW_CHECKS)
    clean = run(lake, lake.put(f"{table_name}/clean.parquet", orders(list(range(20)))), audits)
    assert clean.status is OutcomeStatus.PUBLISHED, clean.message
    assert clean.report is not None
    assert [(c.check, c.target, c.status) for c in clean.report.checks] == [
        ("not_null", "id", CheckStatus.PASSED), ("not_null", "name", CheckStatus.PASSED),
        ("unique", "id", CheckStatus.PASSED), ("unique", "id vs main", CheckStatus.PASSED),
        ("accepted_values", "status", CheckStatus.PASSED), ("range", "amount", CheckStatus.PASSED),
        ("regex", "code", CheckStatus.PASSED), ("row_count", "rows", CheckStatus.PASSED),
        ("freshness", "ts", CheckStatus.PASSED), ("custom_sql", "b orders over 90", CheckStatus.PASSED),
    ]

    # 8 rows: id 3 is already on main, id 100 twice; one null name; bad status, amounts, codes; 2 days old
    bad = orders([3, 100, 100, 101, 102, 103, 104, 105],
                 names=["x", None, "y", "z", "w", "v", "u", "t"],
                 status=["a", "b", "zz", "a", "b", "a", "b", "a"],
                 amount=[1.0, 95.0, 2.0, -5.0, 150.0, 3.0, 4.0, 5.0],
                 code=["ABC", "ABC", "abc", "ABCD", "ABC", "ABC", "ABC", "ABC"],
                 age=timedelta(days=2))
    main_before = lake.main_hash()
    outcome = run(lake, lake.put(f"{table_name}/bad.parquet", bad), audits, notifier := RecordingNotifier())
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message
    assert outcome.report is not None and outcome.branch
    failed = {(c.check, c.target): c for c in outcome.report.failures}
    assert {k: c.measured for k, c in failed.items() if k[0] != "freshness"} == {
        ("not_null", "name"): "1 nulls",
        ("unique", "id"): "1 rows repeat a key of the new rows",
        ("unique", "id vs main"): "1 new rows have a key already on main",
        ("accepted_values", "status"): "1 rows outside",
        ("range", "amount"): "2 rows outside",
        ("regex", "code"): "2 rows outside",
        ("custom_sql", "b orders over 90"): "2 rows returned",
    }
    assert failed[("freshness", "ts")].measured.endswith("(2d old)")
    assert {c.check for c in outcome.report.checks if c.passed} == {"not_null", "row_count"}
    assert [s["name"] for s in failed[("not_null", "name")].samples] == ["null"]
    assert sorted(s["amount"] for s in failed[("range", "amount")].samples) == ["-5.0", "150.0"]
    assert failed[("unique", "id")].samples == ({"id": "100", "count": "2"},)
    assert [s["id"] for s in failed[("unique", "id vs main")].samples] == ["3"]
    assert sorted(s["id"] + "/" + s["amount"] for s in failed[("custom_sql", "b orders over 90")].samples) == [
        "100/95.0", "102/150.0"]
    assert all(len(c.samples) <= 5 for c in outcome.report.checks)
    assert lake.main_hash() == main_before and lake.count(f"wap.{table_name}") == 20

    [alert] = notifier.alerts
    assert alert.kind is AlertKind.REJECTED
    assert "FAILED range(amount): measured 2 rows outside, expected values &gt;= 0 and &lt;= 100" in alert.text
    assert "e.g. id=104, name=w, status=b, amount=150.0" in alert.text or "amount=-5.0" in alert.text
    assert "2 other check(s) passed" in alert.text

    stored = lake.service.ports.reports.load(outcome.branch)
    assert stored is not None and stored["report"] == outcome.report.to_dict()
    assert main(["show", outcome.branch]) == 0
    shown = capsys.readouterr().out
    assert "FAILED  range(amount): 2 rows outside (expected values >= 0 and <= 100; error)" in shown
    assert "e.g. id=101" in shown or "e.g. id=102" in shown


def test_schema_policy_rejects_drift_and_evolves_the_branch_only(lake: Lake, table_name: str) -> None:
    schema = {"check": "schema", "columns": {"my_col_0": "int", "my_col_1": "string"}}
    allow = suites(table_name, [schema | {"new_columns": "allow"}, {"check": "row_count", "max": 10}])
    reject = suites(table_name, [schema])
    assert run(lake, lake.put(f"{table_name}/1.parquet", parquet_bytes(5)), allow).status is OutcomeStatus.PUBLISHED

    extra = {"extra": list(range(20))}
    refused = run(lake, lake.put(f"{table_name}/new.parquet", parquet_bytes(20, extra=extra)), reject)
    assert refused.status is OutcomeStatus.INVALID and refused.report is not None
    assert refused.report.failures[0].measured == "new extra (bigint)"
    assert "schema policy rejects new columns" in refused.message and "new_columns: allow" in refused.message

    changed = table_bytes({"my_col_0": pa.array(["x"]), "my_col_1": pa.array(["y"])})
    drift = run(lake, lake.put(f"{table_name}/drift.parquet", changed), allow)
    assert drift.status is OutcomeStatus.INVALID and drift.report is not None
    assert drift.report.failures[0].measured == (
        "missing my_col_2 (double); my_col_0: int in the table, string in the file")
    assert not [b for b in lake.wap_branches() if table_name in b]

    # allowed: the column is added on the branch; this file is too big, so it waits there and main keeps 3 columns
    held = run(lake, lake.put(f"{table_name}/held.parquet", parquet_bytes(20, extra=extra)), allow)
    assert held.status is OutcomeStatus.REJECTED and held.report is not None and held.branch
    assert "added on the branch: extra" in held.report.checks[0].measured and held.report.checks[0].passed
    spark = lake.service.ports.writer.spark
    assert "extra" not in spark.table(f"nessie.wap.{table_name}").columns
    assert "extra" in spark.table(f"nessie.wap.`{table_name}@{held.branch}`").columns
    published = run(lake, lake.put(f"{table_name}/ok.parquet", parquet_bytes(4, extra={"extra": [1, 2, 3, 4]})), allow)
    assert published.status is OutcomeStatus.PUBLISHED, published.message
    spark.catalog.refreshTable(f"nessie.wap.{table_name}")  # the session's catalog caches main's table, read above
    assert "extra" in spark.table(f"nessie.wap.{table_name}").columns
    assert lake.count(f"wap.{table_name}") == 9


def test_warn_checks_publish_and_alert_with_the_history_comparison(lake: Lake, table_name: str) -> None:
    audits = suites(table_name, [
        {"check": "row_count_vs_history", "factor": 2, "last": 3, "min_loads": 2, "severity": "warn"},
        {"check": "not_null", "columns": ["my_col_1"], "severity": "warn"},
    ])
    for i in range(2):
        first = run(lake, lake.put(f"{table_name}/{i}.parquet", parquet_bytes(10)), audits, RecordingNotifier())
        assert first.status is OutcomeStatus.PUBLISHED and first.report is not None
        assert first.report.checks[0].passed  # too few loads to compare, then 10 rows = 1.00x
    notifier = RecordingNotifier()
    outcome = run(lake, lake.put(f"{table_name}/big.parquet", parquet_bytes(100, nulls=3)), audits, notifier)
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert outcome.report is not None
    assert [(c.status, c.measured) for c in outcome.report.checks] == [
        (CheckStatus.WARNED, "100 rows = 10.00x the average 10 of the last 2 loads"),
        (CheckStatus.WARNED, "3 nulls"),
    ]
    assert lake.count(f"wap.{table_name}") == 120
    [alert] = notifier.alerts
    assert alert.kind is AlertKind.WARNED
    assert "WARNED row_count_vs_history(rows): measured 100 rows = 10.00x the average 10" in alert.text
    assert "expected between 5 and 20 rows (factor 2)" in alert.text
    assert "WARNED not_null(my_col_1): measured 3 nulls" in alert.text and "my_col_1=null" in alert.text


def test_wap_audit_is_a_dry_run(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The test audits file's default suite: not_null my_col_1, row_count min 1."""
    main_before = lake.main_hash()
    bad = lake.put(f"{table_name}/bad.parquet", parquet_bytes(10, nulls=2))
    assert main(["audit", bad.uri, "--json"]) == 1
    run_ = json.loads(capsys.readouterr().out)
    assert run_["status"] == "failed" and run_["rows"] == 10 and "nothing was published" in run_["message"]
    assert [c["measured"] for c in run_["report"]["checks"]] == ["2 nulls", "10 rows"]
    good = lake.put(f"{table_name}/good.parquet", parquet_bytes(3))
    assert main(["audit", good.uri]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert lake.main_hash() == main_before
    branches = [b.name for b in lake.service.ports.catalog.list_branches("dryrun-")]
    assert not [b for b in branches if table_name in b]
