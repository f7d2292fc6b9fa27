"""One behaviour suite for the ReportStore port, run against the in-memory fake and S3ReportStore on the stack's
moto server: what is saved for a branch is loaded back as its JSON form, a branch without a report has none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes import FakeReportStore
from wap_ingest.core.ports import ReportStore


@pytest.fixture(params=["fake", pytest.param("s3", marks=pytest.mark.stack)])
def reports(request: pytest.FixtureRequest) -> Iterator[ReportStore]:
    if request.param == "fake":
        yield FakeReportStore()
        return
    from wap_ingest.adapters.aws.s3_reports import S3ReportStore

    yield S3ReportStore(request.getfixturevalue("stack_s3"), request.getfixturevalue("fresh_bucket"))


def branch() -> str:
    return f"wap-orders-{uuid.uuid4().hex[:16]}-a1b2c3d4"


def test_a_saved_report_loads_back_as_json(reports: ReportStore) -> None:
    name = branch()
    document = {"status": "rejected", "rows": 42, "ratio": 0.5, "ok": False, "branch": name, "error": None,
                "report": {"checks": [{"check": "not_null", "columns": ("a", "b")}]}}
    where = reports.save(name, document)
    assert name in where and where.endswith(".json")
    loaded = reports.load(name)
    assert loaded == {**document, "report": {"checks": [{"check": "not_null", "columns": ["a", "b"]}]}}  # JSON: lists
    assert loaded is not document


def test_a_branch_without_a_report_has_none(reports: ReportStore) -> None:
    reports.save(branch(), {"status": "rejected"})
    assert reports.load(branch()) is None


def test_the_latest_report_of_a_branch_is_kept(reports: ReportStore) -> None:
    name = branch()
    reports.save(name, {"status": "rejected", "attempt": 1})
    reports.save(name, {"status": "rejected", "attempt": 2})  # a re-audit on the same branch
    assert reports.load(name) == {"status": "rejected", "attempt": 2}
