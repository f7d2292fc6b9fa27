"""Sample rows may hold personal data: `samples: false` keeps them out of the alert and the stored report, and
`mask:` replaces a column's values with a hash, through the real engine, report store and alert."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake
from tests.fakes import FakeNotifier
from wap_ingest.core.audits import suites_from
from wap_ingest.core.audits.suite import masked_value
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.models import IngestOutcome, OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]
EMAILS = ["ann@example.com", "bob@example.com", "cy@example.com"]


def people() -> bytes:
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "email": pa.array(EMAILS, pa.string()),
                      "age": pa.array([-1, -2, 30], pa.int64())})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def rejected(lake: Lake, table: str, entry: dict[str, object]) -> tuple[IngestOutcome, str, str]:
    suites = suites_from({"tables": {table: entry}}, default_namespace="wap")
    notifier = FakeNotifier()
    svc = lake.service
    (outcome,) = ingest([Item(lake.put(f"{table}/people.parquet", people()))], ports=svc.ports, suites=suites,
                        config=svc.config, notifier=notifier)
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.REJECTED, outcome
    assert outcome.branch is not None
    stored = json.dumps(svc.ports.reports.load(outcome.branch))  # type: ignore[union-attr]
    [alert] = notifier.alerts
    return outcome, stored, alert.text


CHECK = {"check": "range", "column": "age", "min": 0}


def test_samples_false_keeps_rows_out_of_the_alert_and_the_report(lake: Lake, table_name: str) -> None:
    outcome, stored, alert = rejected(lake, table_name, {"checks": [CHECK], "samples": False})
    assert "2 rows" in alert or "2" in alert  # the count is still told
    for email in EMAILS:
        assert email not in stored and email not in alert and email not in outcome.message
    assert all(not c.samples for c in outcome.report.checks)  # type: ignore[union-attr]


def test_masked_columns_are_hashed_in_the_alert_and_the_report(lake: Lake, table_name: str) -> None:
    outcome, stored, alert = rejected(lake, table_name, {"checks": [CHECK], "mask": ["email"]})
    [failed] = outcome.report.failures  # type: ignore[union-attr]
    assert failed.samples and {s["email"] for s in failed.samples} <= {masked_value(e) for e in EMAILS}
    assert {s["id"] for s in failed.samples} == {"1", "2"}  # the other columns are shown
    for email in EMAILS:
        assert email not in stored and email not in alert
    assert masked_value(EMAILS[0]) in stored or masked_value(EMAILS[1]) in stored
