"""core.downstream: which outcome sends which event, and a failing sink that changes nothing."""

from __future__ import annotations

from tests.fakes import FakeEventSink
from wap_ingest.core.downstream import FILE_INVALID, FILE_REJECTED, TABLE_PUBLISHED, announce, event_for
from wap_ingest.core.errors import CatalogUnavailableError
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, IngestOutcome, OutcomeStatus, SourceObject

SOURCE = SourceObject("inbox", "orders/a.parquet", etag="e1", version_id="v1")


def outcome(status: OutcomeStatus, **kwargs: object) -> IngestOutcome:
    return IngestOutcome(source=SOURCE, status=status, table="wap.orders", **kwargs)  # type: ignore[arg-type]


def test_published_rejected_and_invalid_send_their_events_with_the_detail_consumers_need() -> None:
    published = event_for(outcome(OutcomeStatus.PUBLISHED, rows=5, branch="wap-x", merged_hash="abc"))
    assert published is not None and published.detail_type == TABLE_PUBLISHED
    assert published.detail["tables"] == ["wap.orders"] and published.detail["objects"] == ["s3://inbox/orders/a.parquet"]
    assert published.detail["rows"] == 5 and published.detail["merged_hash"] == "abc"
    assert published.detail["object_versions"] == [{"uri": SOURCE.uri, "etag": "e1", "version_id": "v1"}]
    report = AuditReport("wap.orders", 5, (CheckResult("not_null", "id", CheckStatus.FAILED, "2", "0"),))
    rejected = event_for(outcome(OutcomeStatus.REJECTED, rows=5, branch="wap-x", report=report, message="nulls"))
    assert rejected is not None and rejected.detail_type == FILE_REJECTED
    assert rejected.detail["failed_checks"] == ["not_null(id)"] and rejected.detail["message"] == "nulls"
    invalid = event_for(outcome(OutcomeStatus.INVALID, message="unsupported file type"))
    assert invalid is not None and invalid.detail_type == FILE_INVALID


def test_duplicates_submissions_and_failures_send_nothing() -> None:
    sink = FakeEventSink()
    announce([outcome(OutcomeStatus.DUPLICATE), outcome(OutcomeStatus.SUBMITTED), CatalogUnavailableError("down")],
             sink)
    assert sink.events == []


def test_a_sink_that_fails_is_logged_and_never_raises() -> None:
    sink = FakeEventSink()
    sink.down = True
    announce([outcome(OutcomeStatus.PUBLISHED, rows=1)], sink)  # no exception
    assert sink.events == []
    announce([outcome(OutcomeStatus.PUBLISHED, rows=1)], None)  # no bus configured
