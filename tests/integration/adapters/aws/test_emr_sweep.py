"""Large files' EMR runs recovered by the schedule's sweep, on moto's EMR Serverless and S3 over HTTP (this module's
own moto server) and slack-sdk against the local Slack sink: the function's real Service routes and submits the file
(routing heads it in moto's S3; the request is the real one), and its sweep finds what no event told of.

moto has no API that fails a job run (its runs are SUCCESS from the start; `cancel_job_run` makes one CANCELLED): a
run that died of its own (driver lost, out of memory) or that hangs is put in FAILED or RUNNING in the moto server's
backend. That is the fault this module injects, as a crash test kills a process; everything the service does goes
through HTTP.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.backends import get_backend

from tests.conftest import AUDITS, parquet_bytes
from tests.integration.setup_aws_harness import ACCOUNT
from wap_ingest.adapters.aws.emr import record_key
from wap_ingest.bootstrap import FunctionUseCases, Service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import audits_digest
from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.entrypoints.inbound import JobStateChange
from wap_ingest.entrypoints.lambda_operations import on_job_state
from wap_stack.slack_sink import read_messages

TABLE = TableRef("wap", "customer_data_log")  # listed in tests/data/audits.yml
KEY = "customer_data_log/big.parquet"
DIED = ("Job failed, please check complete logs in configured logging destination. ExitCode: 137. Last few "
        "exceptions: Caused by: org.apache.spark.SparkException: Driver lost (java.lang.OutOfMemoryError)")



@dataclass
class Lake:
    """Buckets and an EMR Serverless application of one test's own on the moto server, and the function's settings."""

    env: dict[str, str]
    s3: Any
    emr: Any
    alerts_file: Path

    @property
    def application(self) -> str:
        return self.env["WAP_EMR_APPLICATION_ID"]

    def service(self) -> Service:
        """A function container of its own (its own clients and adapters)."""
        return Service(Settings.from_env(self.env))

    def drop(self) -> SourceObject:
        self.s3.put_object(Bucket=self.env["SOURCE_BUCKET"], Key=KEY, Body=parquet_bytes(400))  # weighed: real
        return SourceObject(self.env["SOURCE_BUCKET"], KEY)

    def runs(self) -> list[dict[str, Any]]:
        listed = self.emr.list_job_runs(applicationId=self.application)["jobRuns"]
        runs = [self.emr.get_job_run(applicationId=self.application, jobRunId=r["id"])["jobRun"] for r in listed]
        return sorted(runs, key=lambda r: int(r["tags"]["wap:attempt"]))

    def end(self, run_id: str, state: str = "FAILED", details: str = DIED) -> None:
        """The fault: EMR ends (or hangs) the run with no outcome recorded, and no event reaches the function."""
        for run in get_backend("emr-serverless")[ACCOUNT.account_id][ACCOUNT.region].job_runs[self.application]:
            if run.id == run_id:
                run.state, run.state_details = state, details

    def record(self) -> dict[str, Any]:
        head = self.s3.head_object(Bucket=self.env["SOURCE_BUCKET"], Key=KEY)
        source = SourceObject(self.env["SOURCE_BUCKET"], KEY, etag=head["ETag"].strip('"'),
                              version_id=head.get("VersionId"))
        key = record_key(TABLE, source)
        return {**json.loads(self.s3.get_object(Bucket=self.env["LAKE_BUCKET"], Key=key)["Body"].read()), "at": key}

    def alerts(self) -> list[str]:
        return [m["text"] for m in read_messages(self.alerts_file)] if self.alerts_file.exists() else []


@pytest.fixture
def lake(moto_url: str, sink: tuple[str, Path]) -> Lake:
    s3 = boto3.client("s3", endpoint_url=moto_url, region_name=ACCOUNT.region)
    emr = boto3.client("emr-serverless", endpoint_url=moto_url, region_name=ACCOUNT.region)
    name = uuid.uuid4().hex[:10]
    for bucket in (f"source-{name}", f"lake-{name}"):
        s3.create_bucket(Bucket=bucket)
    application = emr.create_application(name=f"wap-{name}", releaseLabel="emr-spark-8.1.0",
                                         type="SPARK")["applicationId"]
    env = {"AWS_ENDPOINT_URL": moto_url, "AWS_REGION": ACCOUNT.region, "SOURCE_BUCKET": f"source-{name}",
           "LAKE_BUCKET": f"lake-{name}", "NESSIE_ENDPOINT": "http://127.0.0.1:1", "WAP_AUDITS_FILE": str(AUDITS),
           "WAP_LARGE_FILE_BYTES": "1000", "WAP_EMR_APPLICATION_ID": application,
           "WAP_EMR_EXECUTION_ROLE_ARN": f"arn:aws:iam::{ACCOUNT.account_id}:role/wap-emr-job",
           "SLACK_TOKEN": "xoxb-sweep-test", "SLACK_CHANNEL": "#data-alerts", "WAP_SLACK_BASE_URL": sink[0]}
    return Lake(env, s3, emr, sink[1])


def submitted(svc: Service, lake: Lake) -> str:
    """The file's event, as the function serves it: routed by the store's size and submitted; the run's id."""
    outcome = svc.ingest(lake.drop())
    assert outcome.status is OutcomeStatus.SUBMITTED, outcome
    [run] = lake.runs()
    return str(run["jobRunId"])


def test_a_run_that_failed_with_no_event_is_resubmitted_by_the_sweep(lake: Lake) -> None:
    svc = lake.service()
    first = submitted(svc, lake)
    lake.end(first)  # the driver died; its state-change event never reached the function

    report = svc.sweep_job_runs()

    assert report is not None and report.errors == () and report.exhausted == ()
    [again] = report.resubmitted
    old, new = lake.runs()
    assert (again.failed_run, again.state, again.attempt, again.new_run) == (first, "FAILED", 2, new["jobRunId"])
    assert (old["jobRunId"], old["state"], new["tags"]["wap:attempt"]) == (first, "FAILED", "2")
    arguments = new["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert arguments[arguments.index("--audits-digest") + 1] == audits_digest(AUDITS)  # the function's suite
    record = lake.record()
    assert (record["attempt"], record["job_run_id"], record["resubmitted_by"]) == (2, new["jobRunId"], "sweep")
    [earlier] = record["previous_runs"]
    assert (earlier["job_run_id"], earlier["state"], earlier["state_details"]) == (first, "FAILED", DIED)
    [alert] = lake.alerts()
    assert f"EMR job run {first} FAILED" in alert and "resubmitted (attempt 2 of 3)" in alert
    assert f"New job run: {new['jobRunId']}" in alert and "The scheduled sweep found it" in alert

    # The new run is alive (moto: SUCCESS): the next sweep, and a late redelivery of the event, start nothing.
    assert svc.sweep_job_runs() == type(report)(checked=1)
    assert svc.ingest(lake.drop()).status is OutcomeStatus.SUBMITTED
    assert len(lake.runs()) == 2 and len(lake.alerts()) == 1


def test_a_run_whose_attempts_are_used_up_is_alerted_once_and_left_to_an_operator(lake: Lake) -> None:
    lake.env["WAP_EMR_MAX_ATTEMPTS"] = "2"
    svc = lake.service()
    first = submitted(svc, lake)
    lake.end(first)
    [again] = svc.sweep_job_runs().resubmitted  # type: ignore[union-attr]
    assert again.new_run is not None
    lake.emr.cancel_job_run(applicationId=lake.application, jobRunId=again.new_run)  # the second run dies too

    report = svc.sweep_job_runs()

    assert report is not None and report.resubmitted == ()
    [exhausted] = report.exhausted
    assert (exhausted.failed_run, exhausted.state, exhausted.new_run) == (again.new_run, "CANCELLED", None)
    assert len(lake.runs()) == 2
    resubmission, final = lake.alerts()
    assert "resubmitted (attempt 2 of 2)" in resubmission
    record = lake.record()
    for part in (f"{again.new_run} ended and was not resubmitted", f"{first} (FAILED), {again.new_run} (CANCELLED)",
                 "WAP_EMR_MAX_ATTEMPTS=2", "wap dlq redrive", f"s3://{lake.env['LAKE_BUCKET']}/{record['at']}"):
        assert part in final, part
    assert record["exhausted_at"]
    # Alerted once: the next sweeps are quiet; a redelivery of the event is refused with the fix (its own failure,
    # alerted by the pipeline as any failed event on its first and last attempt).
    assert svc.sweep_job_runs() == type(report)(checked=1) and len(lake.alerts()) == 2
    with pytest.raises(InfrastructureError, match="failed 2 time"):
        svc.ingest(lake.drop())
    assert len(lake.runs()) == 2 and "failed 2 time(s), the most allowed" in lake.alerts()[2]


def _before_next_write(svc: Service, action: Any) -> None:
    """Run `action` once, just before this container's next write of a record (after it read the record: the
    interleaving two Lambda containers can have), through botocore's own event hooks on the container's S3 client."""
    done: list[bool] = []

    def hook(**_: Any) -> None:
        if not done:
            done.append(True)
            action()

    svc.s3.meta.events.register("before-parameter-build.s3.PutObject", hook)


def test_a_run_the_event_resubmitted_is_not_resubmitted_again_by_a_sweep_that_read_it_before(lake: Lake) -> None:
    sweeper, listener = lake.service(), lake.service()  # two function containers
    first = submitted(sweeper, lake)
    lake.end(first)
    answers: list[dict[str, Any]] = []
    change = JobStateChange(lake.application, first, "FAILED")
    _before_next_write(sweeper, lambda: answers.append(on_job_state(FunctionUseCases(listener).operations, change)))

    report = sweeper.sweep_job_runs()  # it read the failed run, then the event resubmitted it first

    [answer] = answers
    old, new = lake.runs()
    assert answer["resubmitted"] == new["jobRunId"] and old["jobRunId"] == first
    assert report is not None and report.resubmitted == () and report.errors == ()
    assert lake.record()["resubmitted_by"] == "event" and len(lake.alerts()) == 1


def test_a_run_the_sweep_resubmitted_is_not_resubmitted_again_by_an_event_that_read_it_before(lake: Lake) -> None:
    sweeper, listener = lake.service(), lake.service()
    first = submitted(sweeper, lake)
    lake.end(first, "CANCELLED", "Job run cancelled by an operator")
    reports: list[Any] = []
    _before_next_write(listener, lambda: reports.append(sweeper.sweep_job_runs()))

    answer = on_job_state(FunctionUseCases(listener).operations, JobStateChange(lake.application, first, "CANCELLED"))

    [report] = reports
    old, new = lake.runs()
    assert [r.new_run for r in report.resubmitted] == [new["jobRunId"]] and old["jobRunId"] == first
    assert answer["resubmitted"] is None  # it found the run the sweep started
    assert lake.record()["resubmitted_by"] == "sweep" and len(lake.alerts()) == 1


def test_a_run_still_running_long_past_its_limit_is_cancelled_and_resubmitted(lake: Lake) -> None:
    svc = lake.service()
    first = submitted(svc, lake)
    lake.end(first, "RUNNING", "")  # hung: EMR should have ended it at its executionTimeoutMinutes
    assert svc.sweep_job_runs() == type(svc.sweep_job_runs())(checked=1)  # within its limit: left alone
    record = lake.record()
    assert record["timeout_minutes"] == 180
    record["submitted_at"] = (datetime.now(UTC) - timedelta(hours=5)).isoformat()  # five hours pass
    lake.s3.put_object(Bucket=lake.env["LAKE_BUCKET"], Key=record.pop("at"), Body=json.dumps(record).encode())

    report = svc.sweep_job_runs()

    assert report is not None
    [again] = report.resubmitted
    old, new = lake.runs()
    assert old["state"] == "CANCELLED"  # cancelled through the API, so it cannot run beside its resubmission
    assert (again.failed_run, again.state, again.new_run) == (first, "CANCELLED", new["jobRunId"])
    [earlier] = lake.record()["previous_runs"]
    assert "still RUNNING 300 minutes after its submission, past its limit of 180 minutes" in earlier["state_details"]
