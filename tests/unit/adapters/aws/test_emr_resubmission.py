"""A large file's job run that died on the infrastructure is resubmitted by the next delivery, alerted, and capped.

EMR Serverless is botocore's Stubber (it checks every request and answer against the service model: moto cannot put
a run in FAILED with state details); the claim record is in moto's S3, in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from tests.fakes import FakeNotifier
from wap_ingest.adapters.aws.emr import EmrServerlessJobs, digest_of, record_key
from wap_ingest.bootstrap.emr_request import client_token_for
from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.models import SourceObject, TableRef

APP, LAKE, ROLE = "00app", "lake", "arn:aws:iam::123456789012:role/wap-emr-job"
LOGS = "s3://lake/emr/logs"
SOURCE = SourceObject("source", "orders/huge.parquet", size=5 * 1024**3, etag="e1")
TABLE = TableRef("wap", "orders")
DIED = ("Job failed, please check complete logs in configured logging destination. ExitCode: 137. Last few "
        "exceptions: Caused by: org.apache.spark.SparkException: Driver lost (java.lang.OutOfMemoryError: Java heap "
        "space)")


def request_for(source: SourceObject, table: TableRef, attempt: int) -> dict[str, Any]:
    return {"applicationId": APP, "clientToken": client_token_for(digest_of(source), attempt),
            "executionRoleArn": ROLE, "name": f"wap-{table.qualified}",
            "jobDriver": {"sparkSubmit": {"entryPoint": "s3://lake/emr/artifacts/emr_job.py"}},
            "configurationOverrides": {"monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": LOGS}}}}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=LAKE)
        yield client


@pytest.fixture
def emr() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("emr-serverless", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def jobs_with(emr: tuple[Any, Stubber], s3: Any, notifier: FakeNotifier, max_attempts: int = 3) -> EmrServerlessJobs:
    return EmrServerlessJobs(emr[0], s3, lake_bucket=LAKE, application_id=APP, request_for=request_for,
                             max_attempts=max_attempts, notifier=notifier)


def arn(run_id: str) -> str:
    return f"arn:aws:emr-serverless:us-east-1:123456789012:/applications/{APP}/jobruns/{run_id}"


def expect_start(stub: Stubber, run_id: str, attempt: int) -> None:
    stub.add_response("start_job_run", {"applicationId": APP, "jobRunId": run_id, "arn": arn(run_id)},
                      request_for(SOURCE, TABLE, attempt))


def expect_state(stub: Stubber, run_id: str, state: str, details: str = "Job is running.") -> None:
    now = datetime.now(UTC)
    stub.add_response("get_job_run", {"jobRun": {
        "applicationId": APP, "jobRunId": run_id, "arn": arn(run_id),
        "createdBy": "arn:aws:iam::123456789012:user/wap", "createdAt": now, "updatedAt": now,
        "executionRole": ROLE, "state": state, "stateDetails": details, "releaseLabel": "emr-spark-8.1.0",
        "jobDriver": {"sparkSubmit": {"entryPoint": "e"}},
    }}, {"applicationId": APP, "jobRunId": run_id})


def record(s3: Any) -> dict[str, Any]:
    return dict(json.loads(s3.get_object(Bucket=LAKE, Key=record_key(TABLE, SOURCE))["Body"].read()))


def test_a_failed_run_is_resubmitted_with_a_new_token_recorded_and_alerted(emr: tuple[Any, Stubber], s3: Any) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    assert jobs.submit(SOURCE, TABLE).job_run_id == "run-1"
    expect_state(stub, "run-1", "FAILED", DIED)
    expect_start(stub, "run-2", attempt=2)  # the Stubber checks the request: a token of its own for attempt 2

    again = jobs.submit(SOURCE, TABLE)  # the event delivered again

    assert (again.job_run_id, again.already_submitted) == ("run-2", False)
    assert client_token_for(digest_of(SOURCE), 2) != client_token_for(digest_of(SOURCE), 1)
    kept = record(s3)
    assert (kept["job_run_id"], kept["attempt"], kept["state"]) == ("run-2", 2, "SUBMITTED")
    [earlier] = kept["previous_runs"]
    assert (earlier["job_run_id"], earlier["state"], earlier["state_details"]) == ("run-1", "FAILED", DIED)
    [alert] = notifier.alerts
    assert alert.kind.value == "infrastructure"
    assert "run-1" in alert.title and "FAILED" in alert.title and SOURCE.uri in alert.title
    assert "attempt 2 of 3" in alert.title
    assert ("Table", "wap.orders") in alert.fields and ("New job run", "run-2") in alert.fields
    assert "Driver lost (java.lang.OutOfMemoryError" in alert.details[0]
    [(_, command)] = alert.commands
    assert f"{LOGS}/applications/{APP}/jobs/run-1/SPARK_DRIVER/stderr.gz" in command


@pytest.mark.parametrize("state", ["SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "SUCCESS"])
def test_a_live_or_successful_run_is_still_already_submitted(
    emr: tuple[Any, Stubber], s3: Any, state: str
) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_state(stub, "run-1", state)

    again = jobs.submit(SOURCE, TABLE)  # no start_job_run stubbed: a second start would fail the test

    assert (again.job_run_id, again.already_submitted) == ("run-1", True)
    assert notifier.alerts == [] and record(s3)["attempt"] == 1


def test_the_attempts_are_capped_and_the_error_says_what_to_do(emr: tuple[Any, Stubber], s3: Any) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier, max_attempts=2), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_state(stub, "run-1", "FAILED", DIED)
    expect_start(stub, "run-2", attempt=2)
    jobs.submit(SOURCE, TABLE)
    expect_state(stub, "run-2", "CANCELLED", "Job run timed out after 180 minutes")

    with pytest.raises(InfrastructureError) as raised:
        jobs.submit(SOURCE, TABLE)

    message = str(raised.value)
    for part in (SOURCE.uri, "wap.orders", "run-1 (FAILED), run-2 (CANCELLED)", "timed out after 180 minutes",
                 "WAP_EMR_MAX_ATTEMPTS=2", "wap dlq redrive", f"wap ingest {SOURCE.uri} --table wap.orders",
                 "re-upload", f"s3://{LAKE}/{record_key(TABLE, SOURCE)}",
                 f"{LOGS}/applications/{APP}/jobs/run-2/SPARK_DRIVER/stderr.gz"):
        assert part in message, part
    assert len(notifier.alerts) == 1  # the resubmission's; the core alerts this error (first and last attempt)
    assert (record(s3)["job_run_id"], record(s3)["attempt"]) == ("run-2", 2)


def test_a_refused_resubmission_keeps_the_failed_run_for_the_next_delivery(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_state(stub, "run-1", "FAILED", DIED)
    stub.add_client_error("start_job_run", "ServiceQuotaExceededException", "too many runs", 402)

    with pytest.raises(InfrastructureError, match="attempt 2"):
        jobs.submit(SOURCE, TABLE)

    kept = record(s3)
    assert (kept["job_run_id"], kept["attempt"], kept.get("previous_runs")) == ("run-1", 1, None)
    assert notifier.alerts == []
    expect_state(stub, "run-1", "FAILED", DIED)
    expect_start(stub, "run-2", attempt=2)
    assert jobs.submit(SOURCE, TABLE).job_run_id == "run-2"


def test_an_unknown_state_is_retried_never_resubmitted(emr: tuple[Any, Stubber], s3: Any) -> None:
    jobs, stub = jobs_with(emr, s3, FakeNotifier()), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    stub.add_client_error("get_job_run", "InternalServerException", "try later", 500)

    with pytest.raises(InfrastructureError, match="reading the state of job run run-1"):
        jobs.submit(SOURCE, TABLE)

    assert record(s3)["job_run_id"] == "run-1"


def test_the_resubmission_alert_escapes_the_key_and_the_state_details() -> None:
    from wap_ingest.core.job_failures import FailedRun, alert_for_resubmission

    loud = SourceObject("source", "orders/<!channel>`x`.parquet")
    alert = alert_for_resubmission(loud, "wap.orders", FailedRun("run-1", "FAILED", "lost <@U1>"), attempt=2,
                                   max_attempts=3, new_run_id="run-2")

    assert "<!channel>" not in alert.title and "&lt;!channel&gt;" in alert.title and "`x`" not in alert.title
    assert alert.details == ("lost &lt;@U1&gt;",) and alert.commands == ()  # no log location: no log command


def expect_tags(stub: Stubber, run_id: str, state: str, tags: dict[str, str]) -> None:
    now = datetime.now(UTC)
    stub.add_response("get_job_run", {"jobRun": {
        "applicationId": APP, "jobRunId": run_id, "arn": arn(run_id),
        "createdBy": "arn:aws:iam::123456789012:user/wap", "createdAt": now, "updatedAt": now,
        "executionRole": ROLE, "state": state, "stateDetails": DIED, "releaseLabel": "emr-spark-8.1.0",
        "jobDriver": {"sparkSubmit": {"entryPoint": "e"}}, "tags": tags,
    }}, {"applicationId": APP, "jobRunId": run_id})


TAGS = {"wap:table": TABLE.qualified, "wap:object-digest": digest_of(SOURCE)[:32]}


def test_a_run_that_ended_failed_is_resubmitted_when_emr_says_so_without_a_redelivery(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    """The EventBridge state change (lambda_handler, EventKind.JOB_STATE) calls run_ended: nobody waits for the
    event to come again."""
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_tags(stub, "run-1", "FAILED", TAGS)  # the run's tags find its record
    expect_state(stub, "run-1", "FAILED", DIED)  # the record's run, read again by submit
    expect_start(stub, "run-2", attempt=2)

    again = jobs.run_ended(APP, "run-1")

    assert again is not None and again.job_run_id == "run-2" and record(s3)["attempt"] == 2
    [alert] = notifier.alerts
    assert "resubmitted (attempt 2 of 3)" in alert.title


def test_run_ended_ignores_other_applications_superseded_runs_and_successes(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    assert jobs.run_ended("another-app", "run-x") is None  # no call at all
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_tags(stub, "run-0", "FAILED", TAGS)  # an older run of the same file: the record names run-1
    assert jobs.run_ended(APP, "run-0") is None
    expect_tags(stub, "run-1", "SUCCESS", TAGS)
    expect_state(stub, "run-1", "SUCCESS")
    assert jobs.run_ended(APP, "run-1") is None
    expect_tags(stub, "run-9", "FAILED", {"project": "wap-lake"})  # not one of ours
    assert jobs.run_ended(APP, "run-9") is None
    assert notifier.alerts == []


# --- the scheduled sweep (core/job_sweep.py decides, for the event path and the sweep alike) ---------------------

def expect_running(stub: Stubber, run_id: str) -> None:
    expect_state(stub, run_id, "RUNNING", "Job is running.")


def put_record(s3: Any, changes: dict[str, Any]) -> None:
    s3.put_object(Bucket=LAKE, Key=record_key(TABLE, SOURCE), Body=json.dumps(record(s3) | changes).encode())


def test_the_sweep_resubmits_a_run_that_failed_with_no_event_and_says_so(emr: tuple[Any, Stubber], s3: Any) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_state(stub, "run-1", "FAILED", DIED)  # no state-change event reached the function
    expect_start(stub, "run-2", attempt=2)

    report = jobs.sweep()

    [again] = report.resubmitted
    assert (report.checked, again.failed_run, again.new_run, again.attempt, again.uri) == (
        1, "run-1", "run-2", 2, SOURCE.uri)
    kept = record(s3)
    assert (kept["job_run_id"], kept["attempt"], kept["resubmitted_by"]) == ("run-2", 2, "sweep")
    [alert] = notifier.alerts
    assert "resubmitted (attempt 2 of 3)" in alert.title and "The scheduled sweep found it" in alert.summary


def test_the_sweep_leaves_alone_a_live_run_a_done_one_and_an_exhausted_one(emr: tuple[Any, Stubber], s3: Any) -> None:
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    expect_running(stub, "run-1")  # submitted just now: well within its limit
    assert jobs.sweep().resubmitted == ()
    put_record(s3, {"final_state": "SUCCESS", "outcome": "published"})  # the job recorded its outcome
    assert jobs.sweep().resubmitted == ()  # no call to EMR at all: the Stubber has nothing queued
    put_record(s3, {"final_state": None, "exhausted_at": "2026-11-24T00:00:00+00:00"})
    assert jobs.sweep() == type(jobs.sweep())(checked=1)
    assert notifier.alerts == []


def test_a_failure_the_job_recorded_is_resubmitted_and_a_recorded_outcome_never_is(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    """The job records its own infrastructure failure before it exits 1 (EMR then says FAILED; moto keeps SUCCESS);
    a recorded outcome is final even if EMR later reports the run FAILED (it died after recording)."""
    notifier = FakeNotifier()
    jobs, stub = jobs_with(emr, s3, notifier), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    put_record(s3, {"final_state": "FAILED", "outcome": "failed", "message": "Nessie answered 503"})
    expect_start(stub, "run-2", attempt=2)  # no get_job_run: the record says it

    [again] = jobs.sweep().resubmitted

    assert again.new_run == "run-2" and record(s3)["previous_runs"][0]["message"] == "Nessie answered 503"
    assert "final_state" not in record(s3)  # the new run's record has no end yet
    put_record(s3, {"final_state": "SUCCESS", "outcome": "published"})
    expect_tags(stub, "run-2", "FAILED", TAGS)
    assert jobs.run_ended(APP, "run-2") is None and len(notifier.alerts) == 1


def test_a_run_still_going_long_past_its_limit_is_cancelled_and_resubmitted(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    now = [datetime(2026, 11, 24, 8, 0, tzinfo=UTC)]
    jobs = EmrServerlessJobs(emr[0], s3, lake_bucket=LAKE, application_id=APP, clock=lambda: now[0],
                             request_for=lambda *a: request_for(*a) | {"executionTimeoutMinutes": 180},
                             notifier=FakeNotifier())
    stub = emr[1]
    stub.add_response("start_job_run", {"applicationId": APP, "jobRunId": "run-1", "arn": arn("run-1")})
    jobs.submit(SOURCE, TABLE)
    now[0] += timedelta(minutes=180 + 59)  # past its limit, within the grace: EMR is ending it
    expect_running(stub, "run-1")
    assert jobs.sweep().resubmitted == ()
    now[0] += timedelta(minutes=2)
    expect_running(stub, "run-1")
    stub.add_response("cancel_job_run", {"applicationId": APP, "jobRunId": "run-1"},
                      {"applicationId": APP, "jobRunId": "run-1"})
    stub.add_response("start_job_run", {"applicationId": APP, "jobRunId": "run-2", "arn": arn("run-2")})

    [again] = jobs.sweep().resubmitted

    assert (again.failed_run, again.state, again.new_run) == ("run-1", "CANCELLED", "run-2")
    [earlier] = record(s3)["previous_runs"]
    assert earlier["state_details"].startswith("still RUNNING 241 minutes after its submission, past its limit of "
                                               "180 minutes")


def test_a_record_changed_since_it_was_read_is_not_overwritten(s3: Any) -> None:
    from wap_ingest.adapters.aws.emr_records import EmrRecords

    records = EmrRecords(s3, LAKE)
    first = records.create("wap-emr/t/x.json", {"attempt": 1})
    assert first is not None and records.create("wap-emr/t/x.json", {"attempt": 9}) is None  # claimed once
    second = records.replace(first, {"attempt": 2})
    assert second is not None
    assert records.replace(first, {"attempt": 3}) is None  # a writer that read the first version loses
    stored = records.read("wap-emr/t/x.json")
    assert stored is not None and stored.body == {"attempt": 2} and stored.etag == second.etag


def test_a_run_refused_for_its_audits_waits_for_the_sweep_or_a_redelivery_not_its_event(
    emr: tuple[Any, Stubber], s3: Any
) -> None:
    """Resubmitting at once would use up the attempts in minutes, before `make emr-artifacts` could fix them."""
    jobs, stub = jobs_with(emr, s3, FakeNotifier()), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    put_record(s3, {"final_state": "FAILED", "outcome": "failed", "refused": "audits",
                    "message": "the audits file it loaded is not the function's"})
    expect_tags(stub, "run-1", "FAILED", TAGS)

    assert jobs.run_ended(APP, "run-1") is None  # EMR's state change: no new run

    expect_start(stub, "run-2", attempt=2)
    [again] = jobs.sweep().resubmitted
    assert again.new_run == "run-2" and "refused" not in record(s3)
    put_record(s3, {"final_state": "FAILED", "refused": "audits", "message": "still not the function's"})
    expect_start(stub, "run-3", attempt=3)
    assert jobs.submit(SOURCE, TABLE).job_run_id == "run-3"  # a redelivery (`wap ingest`) resubmits too


def test_one_record_the_sweep_cannot_read_never_stops_the_others(emr: tuple[Any, Stubber], s3: Any) -> None:
    jobs, stub = jobs_with(emr, s3, FakeNotifier()), emr[1]
    expect_start(stub, "run-1", attempt=1)
    jobs.submit(SOURCE, TABLE)
    s3.put_object(Bucket=LAKE, Key="wap-emr/wap.orders/0000.json", Body=b"{not json")  # sorted first
    s3.put_object(Bucket=LAKE, Key="wap-emr/wap.orders/0001.json", Body=b'{"table": "wap.orders"}')
    expect_state(stub, "run-1", "FAILED", DIED)
    expect_start(stub, "run-2", attempt=2)

    report = jobs.sweep()

    assert [r.new_run for r in report.resubmitted] == ["run-2"] and report.checked == 3
    assert [e.split(": ")[0] for e in report.errors] == [f"s3://{LAKE}/wap-emr/wap.orders/0000.json",
                                                         f"s3://{LAKE}/wap-emr/wap.orders/0001.json"]
