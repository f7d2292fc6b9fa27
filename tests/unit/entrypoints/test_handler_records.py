"""The SQS side of the handler on Powertools' batch processor, on fakes: a message's exception fails that message
alone; a message is consumed only when every object it announced is; the batch still shares one ingest."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tests.fakes import FakeBatchWriter, rows_on
from tests.unit.entrypoints.test_lambda_handler import ROWS, S3_PUT, World, failing_for, fixture, s3_body, sqs_event
from wap_ingest.bootstrap import FunctionUseCases, Service
from wap_ingest.core.alerts import Alert, AlertKind
from wap_ingest.core.errors import CatalogUnavailableError
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints import lambda_handler

TABLE = "wap.customer_data_log"


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def failures(result: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in result["batchItemFailures"]]


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {o["object"].removeprefix("s3://source/"): o["status"] for o in result["objects"]}


def test_one_message_fails_as_a_whole_when_any_of_its_objects_failed(world: World,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """m0 announces three objects (one S3 notification with three records), one of which fails on Nessie: m0 goes
    back to the queue, m1 does not; m0's good objects are published now and are duplicates when it comes back."""
    for key in ("customer_data_log/a.parquet", "broken_table/x.parquet", "customer_data_log/b.parquet",
                "customer_data_log/c.parquet"):
        world.objects.put("source", key, ROWS)
    failing_for(world, monkeypatch, "broken_table/", CatalogUnavailableError("Nessie is down"))
    event = fixture("sqs_one_message_several_objects.json")
    result = world.invoke(event)
    assert failures(result) == ["m0"]
    assert statuses(result) == {"customer_data_log/a.parquet": "published", "broken_table/x.parquet": "failed",
                                "customer_data_log/b.parquet": "published", "customer_data_log/c.parquet": "published"}
    assert len(rows_on(world.catalog, "main", TABLE)) == 3

    monkeypatch.undo()  # Nessie is back
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(world.service))
    again = world.invoke({"Records": [event["Records"][0]]})
    assert failures(again) == []
    assert statuses(again) == {"customer_data_log/a.parquet": "duplicate", "broken_table/x.parquet": "published",
                               "customer_data_log/b.parquet": "duplicate"}
    assert len(rows_on(world.catalog, "main", TABLE)) == 3


def test_the_messages_of_a_batch_still_share_one_run_per_table(world: World) -> None:
    """Four files of one table in three messages: one write, one merge (the burst's performance)."""
    world.writer = FakeBatchWriter(world.catalog, world.objects)
    world.service = world.service.replaced(ports=replace(world.service.ports, writer=world.writer))
    for name in "abcd":
        world.objects.put("source", f"customer_data_log/{name}.parquet", ROWS)
    two = json.dumps({"Records": [json.loads(s3_body(f"customer_data_log/{n}.parquet"))["Records"][0] for n in "ab"]})
    result = world.invoke(sqs_event(two, *(s3_body(f"customer_data_log/{n}.parquet") for n in "cd")))
    assert failures(result) == [] and set(statuses(result).values()) == {"published"}
    assert world.writer.batches == [4]  # type: ignore[attr-defined]
    assert len([c for c in world.catalog.calls if c.startswith("merge ")]) == 1


def test_an_exception_in_one_record_handler_fails_that_message_alone(world: World) -> None:
    """The notifier raising (it must not) while m0, unreadable, is being refused: m0 fails, m1 is still settled
    and consumed."""
    def broken(alert: Alert) -> bool:
        raise RuntimeError("the notifier is broken")

    world.notifier.notify = broken  # type: ignore[method-assign]
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    result = world.invoke(sqs_event("not an event", s3_body("customer_data_log/a.parquet")))
    assert failures(result) == ["m0"]
    assert statuses(result) == {"customer_data_log/a.parquet": "published"}
    assert len(rows_on(world.catalog, "main", TABLE)) == 1


def test_a_malformed_notification_fails_its_message_alone(world: World) -> None:
    """A key that is not a string: that message is unreadable (and alerted); its neighbour publishes."""
    bad = json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                                   "s3": {"bucket": {"name": "source"}, "object": {"key": 5}}}]})
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    result = world.invoke(sqs_event(bad, s3_body("customer_data_log/a.parquet")))
    assert failures(result) == ["m0"]
    assert statuses(result) == {"customer_data_log/a.parquet": "published"}
    [alert] = world.notifier.alerts
    assert "cannot read" in alert.title and "object key is 5" in alert.text


def test_the_batch_ingest_raising_fails_the_messages_with_objects_and_nothing_else(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the one ingest call: each message that carried objects fails (its objects alerted once), the publish
    request is still answered and S3's test event still consumed."""
    def ingest_all(self: Service, items: Any, out_of_time: Any = None) -> Any:
        raise RuntimeError("a bug")

    answered: list[str] = []

    def answer(self: Service, request: PublishRequest, message_id: str, queue_arn: str | None = None
               ) -> dict[str, Any]:
        answered.append(request.request_id)
        return {"request_id": request.request_id, "branch": request.branch, "action": "published"}

    monkeypatch.setattr(Service, "ingest_all", ingest_all)
    monkeypatch.setattr(Service, "answer", answer)
    request = PublishRequest("wap-orders-1", "checked", reaudit=False, request_id="abc123")
    result = world.invoke(sqs_event(s3_body("customer_data_log/a.parquet"), request.to_body(),
                                    json.dumps({"Event": "s3:TestEvent"})))
    assert failures(result) == ["m0"]
    assert statuses(result) == {"customer_data_log/a.parquet": "failed"}
    assert "unexpected RuntimeError: a bug" in result["objects"][0]["message"]
    assert answered == ["abc123"] and result["requests"][0]["action"] == "published"
    assert [a.kind for a in world.notifier.alerts] == [AlertKind.INFRASTRUCTURE]


def test_a_publish_request_that_fails_fails_its_message_alone(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(self: Service, request: PublishRequest, message_id: str, queue_arn: str | None = None
               ) -> dict[str, Any]:
        raise CatalogUnavailableError("Nessie is down")

    monkeypatch.setattr(Service, "answer", answer)
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    request = PublishRequest("wap-orders-1", "checked", reaudit=False, request_id="abc123")
    result = world.invoke(sqs_event(s3_body("customer_data_log/a.parquet"), request.to_body()))
    assert failures(result) == ["m1"]
    assert statuses(result) == {"customer_data_log/a.parquet": "published"} and "requests" not in result


def test_a_batch_where_every_message_failed_is_still_a_partial_response(world: World) -> None:
    result = world.invoke(sqs_event("not an event", "nor this", receive_count=2))
    assert failures(result) == ["m0", "m1"] and result["objects"] == []
    assert world.notifier.alerts == []  # attempt 2 of 3: neither the first nor the last


def test_a_direct_event_raises_after_handling_every_object(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    event = fixture("s3_put.json")
    second = json.loads(json.dumps(event["Records"][0]))
    second["s3"]["object"]["key"] = "broken_table/x.parquet"
    event["Records"].append(second)
    world.objects.put("source", "customer_data_log/my file ü.parquet", ROWS, **S3_PUT)
    world.objects.put("source", "broken_table/x.parquet", ROWS, **S3_PUT)  # the fixture's version, copied
    failing_for(world, monkeypatch, "broken_table/", CatalogUnavailableError("Nessie is down"))
    with pytest.raises(lambda_handler.InvocationFailedError, match="1 of 2 objects failed: s3://source/broken_table"):
        world.invoke(event)
    assert len(rows_on(world.catalog, "main", TABLE)) == 1
