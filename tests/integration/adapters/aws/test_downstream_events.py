"""Downstream events on the local stack (issue 16, item 3): each outcome sends its event to the stack's EventBridge
bus (moto), whose rule delivers it to WAP_STACK_DOWNSTREAM_QUEUE_URL, read back here as a consumer would. Through
the event path (the function under the emulator, fed by SQS) and through a direct run (`wap ingest`'s path); a bus
that cannot be reached changes no outcome. The EMR job's events: tests/e2e/test_scale_out.py."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.downstream import about_object, events_about
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_the_event_path_announces_published_rejected_and_invalid_files(lake: Lake, table_name: str) -> None:
    lake.drop(f"{table_name}/clean.parquet", parquet_bytes(9))
    lake.drop(f"{table_name}/nulls.parquet", parquet_bytes(9, nulls=2))
    lake.drop(f"{table_name}/sheet.xlsx", b"PK\x03\x04")
    found = {}
    for name in ("clean.parquet", "nulls.parquet", "sheet.xlsx"):
        events = events_about(lake.env, about_object(f"{table_name}/{name}"), 1)
        assert len(events) == 1, f"no single event for {name}: {events}"
        found[name] = events[0]
    published, rejected, invalid = found["clean.parquet"], found["nulls.parquet"], found["sheet.xlsx"]
    assert {e["source"] for e in found.values()} == {"wap-lake"}
    assert published["detail-type"] == "Table Published"
    detail = published["detail"]
    assert detail["tables"] == [f"wap.{table_name}"] and detail["rows"] == 9 and detail["merged_hash"]
    history = lake.service.ports.catalog.publications(TableRef("wap", table_name))
    assert detail["merged_hash"] in {p.hash for p in history}
    assert rejected["detail-type"] == "File Rejected" and rejected["detail"]["branch"] in lake.wap_branches()
    assert rejected["detail"]["failed_checks"] == ["not_null(my_col_1)"] and rejected["detail"]["merged_hash"] is None
    assert invalid["detail-type"] == "File Invalid" and "unsupported file type" in invalid["detail"]["message"]


def test_a_direct_run_announces_the_same_way(lake: Lake, table_name: str) -> None:
    outcome = lake.service.ingest(lake.put(f"{table_name}/direct.parquet", parquet_bytes(4)))
    assert outcome.status is OutcomeStatus.PUBLISHED
    [event] = events_about(lake.env, about_object(f"{table_name}/direct.parquet"), 1)
    assert event["detail-type"] == "Table Published" and event["detail"]["merged_hash"] == outcome.merged_hash


def test_an_unreachable_bus_changes_no_outcome(lake: Lake, table_name: str) -> None:
    from wap_ingest.adapters.aws.eventbridge import EventBridgeSink
    from wap_ingest.bootstrap import boto3_client

    class Kept(logging.Handler):  # on the module's own logger: independent of how the handler wired the root
        def __init__(self) -> None:
            super().__init__(logging.ERROR)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    kept, logger = Kept(), logging.getLogger("wap_ingest.core.downstream")
    broken = lake.service.replaced(events=EventBridgeSink(boto3_client("events", lake.service.settings),
                                                          "no-such-bus"))
    logger.addHandler(kept)
    try:
        outcome = broken.ingest(lake.put(f"{table_name}/lost.parquet", parquet_bytes(3)))
    finally:
        logger.removeHandler(kept)
    assert outcome.status is OutcomeStatus.PUBLISHED and lake.count(f"wap.{table_name}") == 3
    assert any("could not be sent (the outcomes stand)" in line for line in kept.lines), kept.lines
