"""The EMR job audits with the function's suite or not at all: the request carries the digest of the function's
audits file, and a job whose own copy (shipped with its artefacts) differs refuses before doing anything, says why
(both digests, the fix) and fails its run, so it is resubmitted once the artefacts are fixed (never consumed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.fakes import FakeNotifier
from wap_ingest.adapters.aws.emr import record_key
from wap_ingest.adapters.aws.emr_records import EmrRecords
from wap_ingest.bootstrap import EmrJobUseCases
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import audits_digest
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.entrypoints import emr_job

SOURCE = SourceObject("source", "orders/huge.csv", size=5 * 1024**3, etag="e1")
TABLE = TableRef("wap", "orders")
FUNCTIONS = "tables:\n  orders:\n    checks:\n      - {check: not_null, columns: [id]}\n"
JOBS = "tables:\n  orders:\n    checks: []\n"  # yesterday's rules, left in the artefacts


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    (tmp_path / "function.yml").write_text(FUNCTIONS)
    (tmp_path / "audits.yml").write_text(JOBS)
    for name, value in {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:1", "AWS_REGION": "us-east-1",
                        "WAP_AUDITS_FILE": str(tmp_path / "audits.yml"), "WAP_EMR_JOB_RUN_ID": "run-1",
                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    notifier = FakeNotifier()

    def no_pipeline() -> Any:
        raise AssertionError("the pipeline must not start with another suite than the function's")

    monkeypatch.setattr(emr_job, "emr_job", lambda: EmrJobUseCases(Settings.from_env(), service=no_pipeline,
                                                                  notifier=notifier))
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        EmrRecords(s3, "lake").create(record_key(TABLE, SOURCE), {  # as the function recorded the submission
            "object": SOURCE.uri, "bucket": SOURCE.bucket, "key": SOURCE.key, "identity": SOURCE.identity,
            "table": TABLE.qualified, "etag": "e1", "size": SOURCE.size, "application_id": "00app",
            "job_run_id": "run-1", "attempt": 1})
        yield {"s3": s3, "notifier": notifier, "expected": audits_digest(tmp_path / "function.yml"),
               "found": audits_digest(tmp_path / "audits.yml")}


def test_a_job_whose_audits_differ_from_the_functions_refuses_and_says_why(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = emr_job.main(["--bucket", "source", "--key", SOURCE.key, "--table", "wap.orders", "--size",
                         str(SOURCE.size), "--etag", "e1", "--audits-digest", job["expected"]])

    assert code == 1  # the run shows FAILED: resubmitted (event, sweep) once the artefacts are fixed
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["status"] == "failed" and printed["object"] == SOURCE.uri
    for part in (job["expected"], job["found"], "make emr-artifacts", "not the function's", "main is untouched"):
        assert part in printed["message"], part
    record = json.loads(job["s3"].get_object(Bucket="lake", Key=record_key(TABLE, SOURCE))["Body"].read())
    assert (record["final_state"], record["outcome"], record["job_run_id"]) == ("FAILED", "failed", "run-1")
    assert record["message"] == printed["message"]
    [alert] = job["notifier"].alerts
    assert alert.kind.value == "infrastructure" and "run-1 refused to run" in alert.title
    assert ("Function's audits (sha256)", job["expected"]) in alert.fields
    assert ("Job's audits (sha256)", job["found"]) in alert.fields
    assert alert.commands[0][1] == "make emr-artifacts"


def test_a_request_without_the_digest_is_refused_too(job: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert emr_job.main(["--bucket", "source", "--key", SOURCE.key, "--table", "wap.orders", "--etag", "e1"]) == 1
    assert "carries no --audits-digest" in capsys.readouterr().out


def test_the_maintenance_job_refuses_another_suite_too(job: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert emr_job.main(["--maintain", "wap.orders", "--audits-digest", job["expected"]]) == 1
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "the maintenance of wap.orders" in printed["error"] and job["found"] in printed["error"]
    [alert] = job["notifier"].alerts
    assert ("Job", "the maintenance of wap.orders") in alert.fields


def test_a_run_the_sweep_replaced_never_writes_over_its_successors_record(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run found hung past its limit was cancelled and resubmitted (the record names the new run): if it still
    ends, its result is not recorded over the new run's."""
    monkeypatch.setenv("WAP_EMR_JOB_RUN_ID", "run-0")  # the record names run-1
    assert emr_job.main(["--bucket", "source", "--key", SOURCE.key, "--table", "wap.orders", "--etag", "e1",
                         "--size", str(SOURCE.size), "--audits-digest", job["expected"]]) == 1
    record = json.loads(job["s3"].get_object(Bucket="lake", Key=record_key(TABLE, SOURCE))["Body"].read())
    assert record["job_run_id"] == "run-1" and "final_state" not in record
