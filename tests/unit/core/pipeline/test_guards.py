"""The guards hold for every entry point (SQS, direct S3, EventBridge, `wap ingest`, `wap audit`, the EMR job): a
bucket that is not a source bucket is refused before anything is read; the store's size routes, not the event's;
a group never stages more than its budget and what does not fit the free disk is deferred; an unexpected error
fails only its own files."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from tests.fakes import FakeObjectStore, rows_on
from tests.unit.entrypoints.test_handler_scale import RecordingJobs
from tests.unit.entrypoints.test_lambda_handler import ROWS, World, failing_for, fixture, s3_body, sqs_event
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.bootstrap.emr_request import audits_digest
from wap_ingest.core.alerts import AlertKind
from wap_ingest.core.dry_run import DryRunStatus, audit_without_publishing
from wap_ingest.core.ingest import LargeFiles
from wap_ingest.core.models import SourceObject
from wap_ingest.entrypoints import lambda_handler

TABLE = "wap.customer_data_log"


class CountingStore(FakeObjectStore):
    """Records every read, to show that a refused object is never read."""

    def __init__(self, inner: FakeObjectStore) -> None:
        super().__init__()
        self.objects = inner.objects
        self.heads: list[tuple[str, str]] = []

    def put(self, bucket: str, key: str, content: Any) -> SourceObject:
        self.objects[(bucket, key)] = content
        return FakeObjectStore.head(self, bucket, key)

    def head(self, bucket: str, key: str, version_id: str | None = None) -> SourceObject:
        self.heads.append((bucket, key))
        return super().head(bucket, key, version_id)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    w.objects = CountingStore(w.objects)
    w.writer.objects = w.objects
    config = replace(w.service.config, source_buckets=frozenset({"source"}), refused_buckets=frozenset({"lake"}))
    w.service = w.service.replaced(config=config, ports=replace(w.service.ports, objects=w.objects))
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def _refused(world: World, result: dict[str, Any], bucket: str) -> None:
    [summary] = result["objects"]
    assert summary["status"] == "invalid" and f"bucket {bucket!r} is not a source bucket" in summary["message"]
    assert world.objects.heads == []  # nothing was read  # type: ignore[attr-defined]
    assert [a.kind for a in world.notifier.alerts] == [AlertKind.INVALID]
    assert world.catalog.list_branches("wap-") == [] and rows_on(world.catalog, "main", TABLE) == []


@pytest.mark.parametrize("bucket", ["lake", "elsewhere"])
def test_sqs_refuses_another_bucket(world: World, bucket: str) -> None:
    world.objects.put(bucket, "customer_data_log/a.parquet", ROWS)
    result = world.invoke(sqs_event(s3_body("customer_data_log/a.parquet", bucket=bucket)))
    _refused(world, result, bucket)
    assert result["batchItemFailures"] == []  # consumed: retrying cannot help


def test_direct_s3_event_refuses_another_bucket(world: World) -> None:
    event = fixture("s3_put.json")
    event["Records"][0]["s3"]["bucket"]["name"] = "lake"
    _refused(world, world.invoke(event), "lake")


def test_eventbridge_refuses_another_bucket(world: World) -> None:
    event = fixture("eventbridge_object_created.json")
    event["detail"]["bucket"]["name"] = "lake"
    _refused(world, world.invoke(event), "lake")


def test_a_dry_run_refuses_another_bucket(world: World) -> None:
    world.objects.put("lake", "customer_data_log/a.parquet", ROWS)
    svc = world.service
    run = audit_without_publishing(SourceObject("lake", "customer_data_log/a.parquet"), ports=svc.ports,
                                   suites=svc.suites, config=svc.config)
    assert run.status is DryRunStatus.INVALID and "not a source bucket" in run.message
    assert world.objects.heads == []  # type: ignore[attr-defined]


def test_wap_ingest_refuses_another_bucket(world: World, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from wap_ingest import bootstrap
    from wap_ingest.entrypoints import cli

    world.objects.put("lake", "warehouse/wap/t/data/x.parquet", ROWS)
    monkeypatch.setattr(bootstrap, "service", lambda: world.service)
    assert cli.main(["ingest", "s3://lake/warehouse/"]) == 1
    assert "bucket 'lake' is not a source bucket" in capsys.readouterr().err
    assert world.objects.heads == [] and world.catalog.list_branches("wap-") == []  # type: ignore[attr-defined]


def test_the_emr_job_refuses_another_bucket(world: World, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from wap_ingest.bootstrap import EmrJobUseCases
    from wap_ingest.entrypoints import emr_job

    for name, value in {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:1",
                        "WAP_AUDITS_FILE": str(world.service.settings.audits_file)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(emr_job, "emr_job", lambda: EmrJobUseCases(world.service.settings,
                                                                  service=lambda: world.service))
    monkeypatch.setattr(EmrJobUseCases, "record", lambda *_a: None)
    suite = audits_digest(world.service.settings.audits_file)  # the function's audits file: the job's is the same
    code = emr_job.main(["--bucket", "lake", "--key", "customer_data_log/a.parquet", "--table", TABLE,
                         "--audits-digest", suite])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and printed["status"] == "invalid" and "not a source bucket" in printed["message"]
    assert world.objects.heads == []  # type: ignore[attr-defined]


def test_the_stores_size_routes_not_the_events(world: World) -> None:
    jobs = RecordingJobs()
    world.service = world.service.replaced(large_files=LargeFiles(jobs, 1000))
    world.objects.put("source", "customer_data_log/big.parquet", b"x" * 5000)  # says 10 bytes in the event
    world.objects.put("source", "customer_data_log/small.parquet", ROWS)
    small_event = json.loads(s3_body("customer_data_log/small.parquet"))
    small_event["Records"][0]["s3"]["object"]["size"] = 10**12  # a lie the other way
    result = world.invoke(sqs_event(s3_body("customer_data_log/big.parquet"), json.dumps(small_event)))
    assert [o["status"] for o in result["objects"]] == ["submitted", "published"]
    assert [s.key for s, _ in jobs.submitted] == ["customer_data_log/big.parquet"]
    assert jobs.submitted[0][0].size == 5000


def test_a_group_stages_at_most_its_budget_at_once(world: World) -> None:
    names = "abcd"
    for i, name in enumerate(names):  # four files of the same size
        world.objects.put("source", f"customer_data_log/{name}.parquet", [dict(ROWS[0], my_col_0=10 + i)])
    size = world.objects.head("source", "customer_data_log/a.parquet").size or 0
    world.service = world.service.replaced(config=replace(world.service.config, staging_budget_bytes=2 * size))
    result = world.invoke(sqs_event(*(s3_body(f"customer_data_log/{n}.parquet") for n in names)))
    assert [o["status"] for o in result["objects"]] == ["published"] * 4
    assert world.writer.batches == [2, 2]  # two groups of two, each staged and cleaned up in turn


def test_files_that_do_not_fit_the_free_disk_are_deferred_without_an_alert(world: World) -> None:
    for name in "ab":
        world.objects.put("source", f"customer_data_log/{name}.parquet", ROWS)
    world.objects.put("source", "orders/c.parquet", ROWS)
    size = world.objects.head("source", "orders/c.parquet").size or 0
    free = iter([10**9, 0])  # room for the first group, then the disk is full
    config = replace(world.service.config, free_bytes=lambda: next(free, 0))
    world.service = world.service.replaced(config=config)
    event = sqs_event(s3_body("customer_data_log/a.parquet"), s3_body("customer_data_log/b.parquet"),
                      s3_body("orders/c.parquet"))
    result = world.invoke(event)
    assert [o["status"] for o in result["objects"]] == ["published", "published", "deferred"]
    assert "free local disk" in result["objects"][2]["message"] and size > 0
    assert result["batchItemFailures"] == [{"itemIdentifier": "m2"}]
    assert world.notifier.alerts == [] and rows_on(world.catalog, "main", "wap.orders") == []


def test_an_unexpected_error_fails_only_its_own_files(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.objects.put("source", "customer_data_log/ok.parquet", ROWS)
    world.objects.put("source", "orders/boom.parquet", ROWS)
    failing_for(world, monkeypatch, "orders/", OSError(28, "No space left on device"))
    result = world.invoke(sqs_event(s3_body("customer_data_log/ok.parquet"), s3_body("orders/boom.parquet")))
    assert [o["status"] for o in result["objects"]] == ["published", "failed"]
    assert "unexpected OSError" in result["objects"][1]["message"]
    assert result["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    assert [a.kind for a in world.notifier.alerts] == [AlertKind.INFRASTRUCTURE]
    assert world.catalog.list_branches("wap-") == []


def test_an_unexpected_error_while_routing_fails_only_that_object(world: World, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    world.objects.put("source", "customer_data_log/ok.parquet", ROWS)
    world.objects.put("source", "customer_data_log/odd.parquet", ROWS)
    real_head = world.objects.head

    def head(bucket: str, key: str, version_id: str | None = None) -> SourceObject:
        if key.endswith("odd.parquet"):
            raise ValueError("a key the store client chokes on")
        return real_head(bucket, key, version_id)

    monkeypatch.setattr(world.objects, "head", head)
    event = sqs_event(s3_body("customer_data_log/ok.parquet"), s3_body("customer_data_log/odd.parquet"))
    result = world.invoke(copy.deepcopy(event))
    assert [o["status"] for o in result["objects"]] == ["published", "failed"]
    assert result["batchItemFailures"] == [{"itemIdentifier": "m1"}]
