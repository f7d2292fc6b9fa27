"""One behaviour suite for the DecisionLog port, run against the in-memory fake and S3DecisionLog on the stack's
moto server: decisions kept per table, newest first, limited, and an earlier one never overwritten."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.fakes import FakeDecisionLog
from wap_ingest.core.errors import CatalogError
from wap_ingest.core.models import DecisionRecord, TableRef
from wap_ingest.core.ports import DecisionLog

T0 = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)


@pytest.fixture(params=["fake", pytest.param("s3", marks=pytest.mark.stack)])
def log(request: pytest.FixtureRequest) -> Iterator[DecisionLog]:
    if request.param == "fake":
        yield FakeDecisionLog()
        return
    from wap_ingest.adapters.aws.decision_log import S3DecisionLog

    yield S3DecisionLog(request.getfixturevalue("stack_s3"), request.getfixturevalue("fresh_bucket"))


def decision(table: TableRef, minutes: float, action: str = "discarded", branch: str | None = None) -> DecisionRecord:
    when = (T0 + timedelta(minutes=minutes)).isoformat(timespec="microseconds")
    return DecisionRecord(table.qualified, branch or f"wap-{uuid.uuid4().hex[:12]}", action, "bad rows", "ops@x",
                          when, source="s3://source/orders/a.parquet")


def test_a_recorded_decision_reads_back_whole(log: DecisionLog) -> None:
    table = TableRef("wap", "orders")
    record = decision(table, 0)
    where = log.record(record)
    assert "://" in where and log.record(decision(table, 1)) != where  # a URI per decision
    assert log.decisions(table)[1] == record
    assert log.decisions(TableRef("wap", "other")) == []


def test_decisions_are_per_table_newest_first_and_limited(log: DecisionLog) -> None:
    table, other = TableRef("wap", "orders"), TableRef("wap", "orders_eu")  # one name a prefix of the other
    recorded = [decision(table, m) for m in (5, 0, 90, 30)]  # not recorded in time order
    for record in recorded:
        log.record(record)
    log.record(decision(other, 60, "published"))
    newest_first = sorted(recorded, key=lambda r: r.decided_at, reverse=True)
    assert log.decisions(table) == newest_first
    assert log.decisions(table, limit=2) == newest_first[:2]
    assert [r.table for r in log.decisions(other)] == [other.qualified]


def test_an_earlier_decision_is_never_overwritten(log: DecisionLog) -> None:
    table = TableRef("wap", "orders")
    first = decision(table, 0, "discarded", branch="wap-same")
    log.record(first)
    later = decision(table, 1, "published", branch="wap-same")
    log.record(later)  # the same branch decided again later: both are kept
    clash = DecisionRecord(first.table, first.branch, "published", "other", "someone@x", first.decided_at)
    with pytest.raises(CatalogError):  # refused, never retried as an outage: the first one stays
        log.record(clash)
    assert log.decisions(table) == [later, first]
