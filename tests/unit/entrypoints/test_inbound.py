"""entrypoints/inbound.py: every event the function receives, read from JSON fixtures into one typed request; an SQS
message that cannot be read is its own `Unreadable`, never an exception."""

from __future__ import annotations

import pytest

from tests.unit.entrypoints.test_lambda_handler import fixture
from wap_ingest.core.ingest import Delivery
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.entrypoints.events import UnreadableEventError
from wap_ingest.entrypoints.inbound import (
    Alarms,
    EventKind,
    JobStateChange,
    ObjectVersions,
    Schedule,
    SqsBatch,
    Unreadable,
    request_from,
)


def read(name: str) -> object:
    return request_from(fixture(name), origin="req-1", max_receives=3)


def test_a_direct_s3_event_is_object_versions_named_by_the_request_id() -> None:
    request = read("s3_put.json")
    assert isinstance(request, ObjectVersions) and request.kind is EventKind.S3
    [item] = request.items
    assert (item.source.key, item.source.version_id, item.source.size) == ("customer_data_log/my file ü.parquet",
                                                                           "v1", 2048)
    assert item.delivery == Delivery(None, None, "req-1:customer_data_log/my file ü.parquet")


def test_a_multipart_upload_announced_twice_is_one_object_and_deletes_are_none() -> None:
    request = read("s3_moto_multipart.json")
    assert isinstance(request, ObjectVersions)
    assert [i.source.key for i in request.items] == ["orders/part+1.csv"]


def test_an_eventbridge_object_created_event() -> None:
    request = read("eventbridge_object_created.json")
    assert isinstance(request, ObjectVersions) and request.kind is EventKind.EVENTBRIDGE
    assert [i.source.key for i in request.items] == ["customer_data_log/café menu.parquet"]


def test_every_sqs_message_is_read_once_into_its_own_request() -> None:
    batch = read("sqs_every_message_kind.json")
    assert isinstance(batch, SqsBatch) and batch.kind is EventKind.SQS
    by_id = {m.message_id: m.request for m in batch.messages}
    assert [m.message_id for m in batch.messages] == [f"m{i}" for i in range(10)]
    assert all(m.delivery.attempt == 2 and m.delivery.max_attempts == 3 and m.receive_count == 2
               for m in batch.messages)
    assert batch.messages[0].queue_arn == "arn:aws:sqs:us-east-1:123456789012:wap-events"
    assert batch.messages[0].receipt_handle == "r0"

    objects = by_id["m0"]  # Put and CompleteMultipartUpload of one version: once; the delete: not at all
    assert isinstance(objects, ObjectVersions) and objects.kind is EventKind.S3
    assert [(i.source.key, i.delivery) for i in objects.items] == [
        ("orders/1 2.csv", Delivery(2, 3, "m0:orders/1 2.csv"))]
    bridged = by_id["m1"]
    assert isinstance(bridged, ObjectVersions) and bridged.kind is EventKind.EVENTBRIDGE
    assert [(i.source.key, i.source.version_id) for i in bridged.items] == [("orders/bé.csv", "v7")]
    assert by_id["m2"] == ObjectVersions(EventKind.S3, ())  # S3's test event announces nothing
    request = by_id["m3"]
    assert isinstance(request, PublishRequest) and (request.branch, request.request_id, request.reaudit) == (
        "wap-orders-1", "abc123", False)

    reasons = {k: r.reason for k, r in by_id.items() if isinstance(r, Unreadable)}
    assert sorted(reasons) == ["m4", "m5", "m6", "m7", "m8", "m9"]
    assert "not JSON" in reasons["m4"]
    assert "an SQS message inside an SQS message" in reasons["m5"]
    assert "alphanumeric request_id" in reasons["m6"]  # a publish request, malformed: never read as a notification
    assert "object key is 5, not a non-empty string" in reasons["m7"]
    assert "malformed S3 notification" in reasons["m8"]
    assert "not a JSON object" in reasons["m9"]


def test_the_alarm_the_job_run_and_the_schedule() -> None:
    alarms = read("sns_dead_letter_alarm.json")
    assert isinstance(alarms, Alarms) and [(a.name, a.state, a.queue) for a in alarms.alarms] == [
        ("wap-ingest-dead-letters", "ALARM", "wap-ingest-dlq")]
    assert read("emr_job_run_failed.json") == JobStateChange("00app", "run-1", "FAILED")
    assert read("maintenance_schedule.json") == Schedule()


@pytest.mark.parametrize(("event", "message"), [
    ({"hello": "world"}, "unrecognised event"),
    ({"source": "aws.emr-serverless", "detail-type": "EMR Serverless Job Run State Change", "detail": {"state": "X"}},
     "without applicationId, jobRunId and state"),
    ({"Records": [{"EventSource": "aws:sns", "Sns": {"Message": "{}"}}]}, "not a CloudWatch alarm"),
    ({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {}}]}, "malformed S3 notification"),
])
def test_an_invocation_that_is_none_of_these_is_refused(event: dict[str, object], message: str) -> None:
    with pytest.raises(UnreadableEventError, match=message):
        request_from(event, origin="req-1", max_receives=3)
