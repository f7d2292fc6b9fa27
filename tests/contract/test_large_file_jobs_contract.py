"""One behaviour suite for the LargeFileJobs port, run against the in-memory fake and EmrServerlessJobs on the
stack's moto (EMR Serverless and S3 over HTTP): one run per object version, runs newest first and per table, and
a run that died (moto: cancel_job_run) resubmitted by the next delivery, up to the allowed attempts.

The real side uses an application of its own, not the stack's: the stack's local runner spark-submits every job
run of its application."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes import FakeJobs
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs

KNOWN_STATES = {"SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "SUCCESS", "FAILED", "CANCELLING", "CANCELLED"}


@dataclass(frozen=True)
class Engine:
    make: Callable[[bool], LargeFileJobs]  # refusing -> an adapter on one shared record store
    end: Callable[[JobRun], None]  # the engine ends a run without an outcome (CANCELLED or FAILED)

    def __call__(self, refusing: bool) -> LargeFileJobs:
        return self.make(refusing)


@pytest.fixture(params=["fake", pytest.param("emr", marks=pytest.mark.stack)])
def engine(request: pytest.FixtureRequest) -> Engine:
    if request.param == "fake":
        fake = FakeJobs()

        def fake_engine(refusing: bool) -> LargeFileJobs:
            fake.refuse = WapError("EMR Serverless refused the job") if refusing else None
            return fake

        return Engine(fake_engine, lambda run: fake.end(run, "CANCELLED"))
    import boto3

    from wap_ingest.adapters.aws.emr import EmrServerlessJobs, digest_of

    env: dict[str, str] = request.getfixturevalue("stack_env")
    s3, bucket = request.getfixturevalue("stack_s3"), request.getfixturevalue("fresh_bucket")
    emr: Any = boto3.client("emr-serverless", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    application = emr.create_application(name=f"contract-{uuid.uuid4().hex[:8]}", releaseLabel="emr-spark-8.1.0",
                                         type="SPARK")["applicationId"]
    assert application != env["WAP_EMR_APPLICATION_ID"]

    def real_engine(refusing: bool) -> LargeFileJobs:
        app = "00nosuchapplication" if refusing else application  # EMR refuses a run for a missing application

        def request_for(source: SourceObject, table: TableRef, attempt: int) -> dict[str, Any]:
            return {"applicationId": app, "clientToken": f"{digest_of(source)[:54]}-attempt{attempt}",
                    "executionRoleArn": env["WAP_EMR_EXECUTION_ROLE_ARN"], "name": f"wap {table.qualified}",
                    "jobDriver": {"sparkSubmit": {"entryPoint": "s3://lake/emr/artifacts/emr_job.py",
                                                  "entryPointArguments": [source.uri, table.qualified]}}}

        return EmrServerlessJobs(emr, s3, lake_bucket=bucket, application_id=app, request_for=request_for)

    return Engine(real_engine, lambda run: emr.cancel_job_run(applicationId=application, jobRunId=run.job_run_id))


@pytest.fixture
def jobs(engine: Engine) -> LargeFileJobs:
    return engine(False)


def version(key: str, etag: str = "e1") -> SourceObject:
    return SourceObject("source", key, size=5_000_000, etag=etag)


def test_one_run_per_object_version(jobs: LargeFileJobs) -> None:
    table = TableRef("wap", "orders")
    source = version("orders/big.parquet")
    first = jobs.submit(source, table)
    assert first.job_run_id and not first.already_submitted
    assert (first.source.uri, first.table, first.state in KNOWN_STATES) == (source.uri, "wap.orders", True)
    again = jobs.submit(version("orders/big.parquet"), table)  # a duplicate event for the same version
    assert again.already_submitted and again.job_run_id == first.job_run_id
    newer = jobs.submit(version("orders/big.parquet", etag="e2"), table)  # the object was replaced
    assert not newer.already_submitted and newer.job_run_id != first.job_run_id
    assert sorted(r.job_run_id for r in jobs.runs(table)) == sorted([first.job_run_id, newer.job_run_id])


def test_runs_are_newest_first_and_filtered_by_table(jobs: LargeFileJobs) -> None:
    orders, customers = TableRef("wap", "orders"), TableRef("wap", "orders_eu")  # one name a prefix of the other
    submitted = [jobs.submit(version(f"orders/{n}.parquet"), orders) for n in range(3)]
    other = jobs.submit(version("orders_eu/x.parquet"), customers)
    assert [r.job_run_id for r in jobs.runs(orders)] == [r.job_run_id for r in submitted[::-1]]
    assert [r.job_run_id for r in jobs.runs(customers)] == [other.job_run_id]
    assert [r.job_run_id for r in jobs.runs()] == [other.job_run_id] + [r.job_run_id for r in submitted[::-1]]
    for run in jobs.runs():
        assert run.state in KNOWN_STATES and not run.already_submitted and run.application_id
    assert jobs.runs(TableRef("wap", "never")) == []


def test_a_refused_submission_raises_a_wap_error_and_a_retry_submits(engine: Engine) -> None:
    table, source = TableRef("wap", "orders"), version("orders/refused.parquet")
    with pytest.raises(WapError):
        engine(True).submit(source, table)
    jobs = engine(False)
    assert jobs.runs(table) == []
    retried = jobs.submit(source, table)  # the redelivered event: the refused attempt left no claim behind
    assert not retried.already_submitted and [r.job_run_id for r in jobs.runs(table)] == [retried.job_run_id]


def test_a_run_that_died_is_resubmitted_until_the_attempts_are_used_up(engine: Engine) -> None:
    jobs, table, source = engine(False), TableRef("wap", "orders"), version("orders/dies.parquet")
    first = jobs.submit(source, table)
    engine.end(first)  # driver lost, out of memory, timeout, cancelled: no outcome was recorded

    second = jobs.submit(source, table)  # the event delivered again (a redrive, `wap ingest`)

    assert not second.already_submitted and second.job_run_id != first.job_run_id
    assert jobs.submit(source, table).already_submitted  # the new run is alive: not started twice
    engine.end(second)
    third = jobs.submit(source, table)
    assert third.job_run_id not in (first.job_run_id, second.job_run_id)
    engine.end(third)
    with pytest.raises(InfrastructureError, match="failed 3 time"):
        jobs.submit(source, table)  # three runs is the default most
    assert [r.job_run_id for r in jobs.runs(table)] == [third.job_run_id]


def test_the_sweep_resubmits_a_run_that_died_with_no_event_once_and_reports_it_exhausted_once(
    engine: Engine,
) -> None:
    jobs, table, source = engine(False), TableRef("wap", "orders"), version(f"orders/swept-{uuid.uuid4().hex}.parquet")

    def swept() -> tuple[list[Any], list[Any]]:
        report = jobs.sweep()
        return ([r for r in report.resubmitted if r.uri == source.uri],
                [r for r in report.exhausted if r.uri == source.uri])

    first = jobs.submit(source, table)
    engine.end(first)  # no state-change event, no redelivery

    [again], [] = swept()

    assert (again.failed_run, again.attempt) == (first.job_run_id, 2) and again.new_run not in (None, first.job_run_id)
    assert swept() == ([], [])  # the new run is alive: not resubmitted twice
    assert jobs.submit(source, table).job_run_id == again.new_run  # nor by a late redelivery of the event
    [second] = jobs.runs(table)
    engine.end(second)
    third = jobs.submit(source, table)  # this time the redelivery comes first: the sweep finds the new run
    assert third.job_run_id not in (first.job_run_id, second.job_run_id) and swept() == ([], [])
    engine.end(third)

    [], [exhausted] = swept()

    assert (exhausted.failed_run, exhausted.new_run, exhausted.attempt) == (third.job_run_id, None, 3)
    assert swept() == ([], [])  # reported (and alerted) once
    with pytest.raises(InfrastructureError, match="failed 3 time"):
        jobs.submit(source, table)
    assert [r.job_run_id for r in jobs.runs(table)] == [third.job_run_id]
