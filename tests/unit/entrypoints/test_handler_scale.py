"""The handler's scale-out decisions on fakes: batches per table, large files to EMR, the remaining-time guard."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tests.fakes import FakeBatchWriter, rows_on
from tests.unit.entrypoints.test_lambda_handler import NULL_ROWS, ROWS, Context, World, s3_body, sqs_event
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.ingest import LargeFiles
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs
from wap_ingest.entrypoints import lambda_handler


class RecordingJobs(LargeFileJobs):
    def __init__(self) -> None:
        self.submitted: list[tuple[SourceObject, TableRef]] = []

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        already = any(s.identity == source.identity for s, _ in self.submitted)
        if not already:
            self.submitted.append((source, table))
        return JobRun("job-1", "app-1", source, table.qualified, "SUBMITTED", "now", already_submitted=already)

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        return []


class ShortContext(Context):
    def __init__(self, remaining_ms: list[int]) -> None:
        self.remaining = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining.pop(0) if len(self.remaining) > 1 else self.remaining[0]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    w.writer = FakeBatchWriter(w.catalog, w.objects)
    w.jobs = RecordingJobs()  # type: ignore[attr-defined]
    settings = replace(w.service.settings, large_file_bytes=1000)
    w.service = w.service.replaced(settings=settings, ports=replace(w.service.ports, writer=w.writer),
                        large_files=LargeFiles(w.jobs, 1000))  # type: ignore[attr-defined]
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def body(key: str, size: int = 10) -> str:
    document = json.loads(s3_body(key))
    document["Records"][0]["s3"]["object"]["size"] = size
    return json.dumps(document)


def test_a_delivery_for_one_table_is_one_batch_and_a_bad_file_fails_no_message(world: World) -> None:
    for name, rows in (("a", ROWS), ("b", NULL_ROWS), ("c", ROWS), ("d", ROWS)):
        world.objects.put("source", f"customer_data_log/{name}.parquet", rows)
    result = world.invoke(sqs_event(*(body(f"customer_data_log/{n}.parquet") for n in "abcd")))
    assert result["batchItemFailures"] == []
    assert [o["status"] for o in result["objects"]] == ["published", "rejected", "published", "published"]
    assert world.writer.batches == [3, 1]  # type: ignore[attr-defined]  # the three together, the bad one alone
    assert len(rows_on(world.catalog, "main", "wap.customer_data_log")) == 3
    assert [a.kind.value for a in world.notifier.alerts] == ["rejected"]


def test_a_large_object_is_submitted_once_and_not_run_here(world: World) -> None:
    world.objects.put("source", "customer_data_log/big.parquet", b"x" * 5000)  # the store's size decides
    event = sqs_event(body("customer_data_log/big.parquet", size=5000), body("customer_data_log/big.parquet", 5000))
    result = world.invoke(event)
    assert [o["status"] for o in result["objects"]] == ["submitted", "submitted"]
    assert "already submitted" in result["objects"][1]["message"]
    jobs: RecordingJobs = world.jobs  # type: ignore[attr-defined]
    assert [(s.key, t.qualified) for s, t in jobs.submitted] == [("customer_data_log/big.parquet",
                                                                  "wap.customer_data_log")]
    assert rows_on(world.catalog, "main", "wap.customer_data_log") == []
    assert result["batchItemFailures"] == []


def test_a_large_object_with_an_unroutable_key_is_invalid_without_a_job(world: World) -> None:
    world.objects.put("source", "Bad Key.parquet", b"x" * 5000)
    result = world.invoke(sqs_event(body("Bad Key.parquet", size=5000)))
    assert result["objects"][0]["status"] == "invalid"
    assert world.jobs.submitted == []  # type: ignore[attr-defined]


def test_the_time_guard_hands_back_what_it_cannot_finish(world: World) -> None:
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    world.objects.put("source", "orders/b.parquet", ROWS)
    event = sqs_event(body("customer_data_log/a.parquet"), body("orders/b.parquet"))
    # 200 s left before the first table, then 30 s: below the 90 s reserve
    result: dict[str, Any] = lambda_handler.handler(event, ShortContext([200_000, 30_000]))
    assert [o["status"] for o in result["objects"]] == ["published", "deferred"]
    assert result["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    assert rows_on(world.catalog, "main", "wap.orders") == []
    assert world.notifier.alerts == []  # a deferral is not news
