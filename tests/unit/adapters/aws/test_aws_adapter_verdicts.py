"""Every AWS adapter judges the same failure the same way (AccessDenied was retried as an S3 outage in one adapter
and a setting in another): each adapter's calls answered with the table's codes by botocore's Stubber
(adapters/aws/errors.py; the table row by row: test_aws_errors.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.stub import Stubber

from tests.aws_stubs import QUEUE, REQUESTS, client
from tests.fakes import FakeNotifier
from wap_ingest.core.errors import (
    CatalogError,
    ConfigError,
    InfrastructureError,
    WapError,
)
from wap_ingest.core.models import DecisionRecord, SourceObject, TableRef

SOURCE_OBJECT = SourceObject("source", "orders/x.csv", 10, "etag1")


def stubbed(service: str, operation: str, code: str, status: int) -> Any:
    """A real client of `service` whose every `operation` call is answered with this error."""
    real = client(service)
    stub = Stubber(real)
    for _ in range(3):
        stub.add_client_error(operation, code, "", status)
    stub.activate()
    return real


def _jobs(emr: Any, s3: Any) -> Any:
    from wap_ingest.adapters.aws.emr import EmrServerlessJobs

    def request_for(source: SourceObject, table: TableRef, attempt: int) -> dict[str, Any]:
        return REQUESTS["emr-serverless", "start_job_run"] | {
            "jobDriver": {"sparkSubmit": {"entryPoint": "s3://lake/emr/emr_job.py"}}}

    return EmrServerlessJobs(emr, s3, lake_bucket="lake", application_id="00app", request_for=request_for,
                             notifier=FakeNotifier())


def _s3_head(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.s3 import S3ObjectStore

    S3ObjectStore(stubbed("s3", "head_object", code, status)).head("source", "orders/x.csv")


def _s3_list(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.s3 import S3ObjectStore

    S3ObjectStore(stubbed("s3", "list_objects_v2", code, status)).list_objects("source", "orders/")


def _report_save(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.s3_reports import S3ReportStore

    S3ReportStore(stubbed("s3", "put_object", code, status), "lake").save("wap-b", {})


def _decision_record(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.decision_log import S3DecisionLog

    S3DecisionLog(stubbed("s3", "put_object", code, status), "lake").record(DecisionRecord(
        table="wap.orders", branch="wap-orders-abc-1", action="discarded", reason="r", actor="op",
        decided_at="2027-01-15T08:00:00+00:00"))


def _emr_submit(code: str, status: int) -> None:
    s3 = client("s3")
    with Stubber(s3) as claims:
        claims.add_response("put_object", {"ETag": "\"e1\""})  # the claim, then its release when the submission failed
        claims.add_response("delete_object", {})
        _jobs(stubbed("emr-serverless", "start_job_run", code, status), s3).submit(SOURCE_OBJECT, TableRef("wap", "o"))


def _emr_claim_read(code: str, status: int) -> None:
    s3 = client("s3")
    with Stubber(s3) as claims:
        claims.add_client_error("put_object", "PreconditionFailed", "", 412)  # claimed by an earlier delivery
        claims.add_client_error("get_object", code, "", status)
        _jobs(client("emr-serverless"), s3).submit(SOURCE_OBJECT, TableRef("wap", "o"))


def _emr_maintenance(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.emr_maintenance import EmrMaintenanceJobs

    EmrMaintenanceJobs(stubbed("emr-serverless", "start_job_run", code, status),
                       lambda table, day: REQUESTS["emr-serverless", "start_job_run"] | {
                           "jobDriver": {"sparkSubmit": {"entryPoint": "s3://lake/emr/emr_job.py"}}}
                       ).submit_maintenance(TableRef("wap", "orders"))


def _emr_run_ended(code: str, status: int) -> None:
    _jobs(stubbed("emr-serverless", "get_job_run", code, status), client("s3")).run_ended("00app", "run-1")


def _events(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.eventbridge import EventBridgeSink
    from wap_ingest.core.downstream import DownstreamEvent

    EventBridgeSink(stubbed("events", "put_events", code, status), "wap").publish(
        [DownstreamEvent("Table Published", {"table": "wap.orders"})])


def _publish_request(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.publish_requests import SqsPublishRequests
    from wap_ingest.core.publish_requests import PublishRequest

    SqsPublishRequests(stubbed("sqs", "send_message", code, status), QUEUE).send(
        PublishRequest(branch="wap-orders-abc-1", reason="ok", reaudit=True))


def _dead_letters(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.dead_letters import SqsDeadLetters

    SqsDeadLetters(stubbed("sqs", "receive_message", code, status), QUEUE + "-dlq", QUEUE).peek()


def _secret(code: str, status: int) -> None:
    from wap_ingest.adapters.aws.secrets import secret_from_parameter

    secret_from_parameter("/wap/slack-token", variable="WAP_SLACK_TOKEN_PARAMETER", what="the Slack token",
                          ssm=stubbed("ssm", "get_parameter", code, status))


ADAPTERS = {"S3ObjectStore.head": (_s3_head, "s3:GetObject"), "S3ObjectStore.list_objects": (_s3_list, "s3:ListBucket"),
            "S3ReportStore.save": (_report_save, "s3:PutObject"), "S3DecisionLog.record": (_decision_record,
                                                                                          "s3:PutObject"),
            "EmrMaintenanceJobs": (_emr_maintenance, "emr-serverless:StartJobRun"),
            "EmrServerlessJobs.submit": (_emr_submit, "emr-serverless:StartJobRun"),
            "EmrServerlessJobs (its record)": (_emr_claim_read, "s3:GetObject"),
            "EmrServerlessJobs.run_ended": (_emr_run_ended, "emr-serverless:GetJobRun"),
            "EventBridgeSink": (_events, "events:PutEvents"), "SqsPublishRequests": (_publish_request,
                                                                                      "sqs:SendMessage"),
            "SqsDeadLetters": (_dead_letters, "sqs:ReceiveMessage"), "secrets": (_secret, "ssm:GetParameter")}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_access_denied_is_a_setting_in_every_adapter(adapter: str) -> None:
    call, action = ADAPTERS[adapter]
    with pytest.raises(WapError) as info:
        call("AccessDenied", 403)
    assert type(info.value) is ConfigError and f"grant {action} on" in str(info.value)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_server_error_is_retried_in_every_adapter(adapter: str) -> None:
    call, _ = ADAPTERS[adapter]
    with pytest.raises(InfrastructureError) as info:
        call("InternalError", 500)
    assert "is unreachable or failing" in str(info.value)


def test_a_decision_is_written_once() -> None:
    with pytest.raises(CatalogError, match="never overwritten"):
        _decision_record("PreconditionFailed", 412)


def test_a_failed_retry_delay_is_logged_with_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    from wap_ingest.adapters.aws.sqs import SqsRetries

    sqs = client("sqs")
    with Stubber(sqs) as stub:
        stub.add_response("get_queue_url", {"QueueUrl": QUEUE})
        stub.add_client_error("change_message_visibility", "AccessDenied", "", 403)
        caplog.set_level(logging.WARNING)
        assert SqsRetries(sqs).back_off("arn:aws:sqs:us-east-1:123456789012:wap-events", "handle", 30) is False
    assert "grant sqs:ChangeMessageVisibility" in caplog.text
