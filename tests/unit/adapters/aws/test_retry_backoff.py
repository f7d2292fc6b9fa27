"""A failed or deferred SQS message comes back after a capped exponential back-off from its receive count, set by
the function itself (the event source mapping would leave it invisible for the queue's whole visibility timeout)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.entrypoints.test_lambda_handler import ROWS, World, failing_for, s3_body, sqs_event
from wap_ingest.adapters.aws.sqs import SqsRetries, queue_url_parts
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.errors import CatalogUnavailableError
from wap_ingest.core.ingest import retry_delay_seconds
from wap_ingest.entrypoints import lambda_handler


class RecordingRetries(SqsRetries):
    def __init__(self) -> None:
        super().__init__(client=None)
        self.delays: list[tuple[str, str, int]] = []

    def back_off(self, queue_arn: str, receipt_handle: str, seconds: int) -> bool:
        self.delays.append((queue_arn, receipt_handle, seconds))
        return True


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    w.retries = RecordingRetries()  # type: ignore[attr-defined]
    settings = replace(w.service.settings, retry_base_seconds=30.0, retry_max_seconds=600.0)
    w.service = w.service.replaced(settings=settings, retries=w.retries)  # type: ignore[attr-defined]
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def test_the_delay_doubles_per_receive_and_is_capped() -> None:
    assert [retry_delay_seconds(n, 30, 600) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]


@pytest.mark.parametrize(("receive_count", "delay"), [(1, 30), (3, 120), (9, 600)])
def test_only_the_failed_message_is_delayed_by_its_receive_count(world: World, monkeypatch: pytest.MonkeyPatch,
                                                                receive_count: int, delay: int) -> None:
    world.objects.put("source", "customer_data_log/ok.parquet", ROWS)
    world.objects.put("source", "broken_table/x.parquet", ROWS)
    failing_for(world, monkeypatch, "broken_table/", CatalogUnavailableError("Nessie is down"))
    event = sqs_event(s3_body("customer_data_log/ok.parquet"), s3_body("broken_table/x.parquet"),
                      receive_count=receive_count)
    result = world.invoke(event)
    assert result["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    assert world.retries.delays == [("arn:aws:sqs:us-east-1:123456789012:wap-events", "r1", delay)]  # type: ignore[attr-defined]


def test_an_unreadable_message_is_delayed_too(world: World) -> None:
    result = world.invoke(sqs_event("not an event"))
    assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert [d[2] for d in world.retries.delays] == [30]  # type: ignore[attr-defined]


def test_published_and_rejected_messages_are_not_delayed(world: World) -> None:
    world.objects.put("source", "customer_data_log/ok.parquet", ROWS)
    world.objects.put("source", "customer_data_log/nulls.parquet", [{"my_col_0": 1, "my_col_1": None, "my_col_2": 1.0}])
    world.invoke(sqs_event(s3_body("customer_data_log/ok.parquet"), s3_body("customer_data_log/nulls.parquet")))
    assert world.retries.delays == []  # type: ignore[attr-defined]


def test_a_queue_arn_names_the_account_and_the_queue() -> None:
    assert queue_url_parts("arn:aws:sqs:eu-west-1:123456789012:wap-events") == ("123456789012", "wap-events")
    with pytest.raises(ValueError, match="not an SQS queue ARN"):
        queue_url_parts("arn:aws:sns:eu-west-1:123456789012:topic")
