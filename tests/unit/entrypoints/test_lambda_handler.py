"""The Lambda handler with JSON event fixtures for the three ways S3 notifications arrive, on fakes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeJobs, FakeObjectStore, FakeWriter, rows_on
from tests.paths import DATA
from wap_ingest.bootstrap import FunctionUseCases, Service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.alerts import Alert, AlertKind
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import CatalogUnavailableError, ObjectStoreUnavailableError
from wap_ingest.core.ingest import LargeFiles
from wap_ingest.core.job_failures import JobRunsExhaustedError
from wap_ingest.core.models import FileFormat, JobRun, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.ports import LargeFileJobs, Notifier, TableMaintainer
from wap_ingest.entrypoints import lambda_handler

EVENTS = DATA / "events"
ROWS = [{"my_col_0": 1, "my_col_1": "a", "my_col_2": 0.5}]
NULL_ROWS = [{"my_col_0": 1, "my_col_1": None, "my_col_2": 0.5}]


class RecordingNotifier(Notifier):
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> bool:
        self.alerts.append(alert)
        return True


class Context:
    function_name = "wap-ingest"
    memory_limit_in_mb = 3008
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:wap-ingest"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


class World:
    def __init__(self) -> None:
        self.catalog = FakeCatalog()
        self.objects = FakeObjectStore()
        self.writer = FakeWriter(self.catalog, self.objects)
        self.notifier = RecordingNotifier()
        settings = Settings.from_env({
            "LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "http://127.0.0.1:1",
            "WAP_AUDITS_FILE": str(EVENTS.parent / "audits.yml"), "WAP_MAX_RECEIVES": "3",
        })
        self.service = Service(
            settings=settings,
            ports=Ports(catalog=self.catalog, writer=self.writer, objects=self.objects),
            suites=suites_from({"defaults": [{"check": "not_null", "columns": ["my_col_1"]}]}, default_namespace="wap"),
            config=PipelineConfig(default_namespace="wap", sleep=lambda _s: None),
            objects=self.objects,  # type: ignore[arg-type]
            notifier=self.notifier,
        )

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        return lambda_handler.handler(event, Context())


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def failing_for(world: World, monkeypatch: pytest.MonkeyPatch, prefix: str, error: Exception) -> None:
    """The engine raises `error` for the files whose keys start with `prefix` (and works for the others)."""
    append, stage = world.writer.append, world.writer.stage

    def flaky_append(spec, source, fmt):  # type: ignore[no-untyped-def]
        if source.key.startswith(prefix):
            raise error
        return append(spec, source, fmt)

    def flaky_stage(spec, files):  # type: ignore[no-untyped-def]
        if files[0][0].key.startswith(prefix):
            raise error
        return stage(spec, files)

    monkeypatch.setattr(world.writer, "append", flaky_append)
    monkeypatch.setattr(world.writer, "stage", flaky_stage)


S3_PUT = {"etag": "0123456789abcdef", "version_id": "v1"}  # the version tests/data/events/s3_put.json announces
EVENTBRIDGE_ETAG = "b1946ac92492d2347c6235b4d2611184"  # eventbridge_object_created.json's


def fixture(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def sqs_event(*bodies: str, receive_count: int = 1) -> dict[str, Any]:
    return {"Records": [
        {"messageId": f"m{i}", "receiptHandle": f"r{i}", "body": body, "md5OfBody": "", "eventSource": "aws:sqs",
         "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:wap-events", "awsRegion": "us-east-1",
         "attributes": {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": "1"}, "messageAttributes": {}}
        for i, body in enumerate(bodies)
    ]}


def s3_body(key: str, bucket: str = "source") -> str:
    return json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                                    "s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": 10}}}]})


def test_direct_s3_event_with_an_encoded_unicode_key(world: World) -> None:
    world.objects.put("source", "customer_data_log/my file ü.parquet", ROWS, **S3_PUT)
    result = world.invoke(fixture("s3_put.json"))
    assert [(o["object"], o["status"]) for o in result["objects"]] == [
        ("s3://source/customer_data_log/my file ü.parquet", "published")
    ]
    assert len(rows_on(world.catalog, "main", "wap.customer_data_log")) == 1


def test_moto_event_without_optional_fields_and_a_double_multipart_announcement(world: World) -> None:
    world.objects.put("source", "orders/part+1.csv", ROWS, etag="abc-2")
    result = world.invoke(fixture("s3_moto_multipart.json"))
    assert [o["object"] for o in result["objects"]] == ["s3://source/orders/part+1.csv"]  # once, deletes ignored
    assert len(rows_on(world.catalog, "main", "wap.orders")) == 1


def test_eventbridge_object_created(world: World) -> None:
    world.objects.put("source", "customer_data_log/café menu.parquet", ROWS, etag=EVENTBRIDGE_ETAG)
    result = world.invoke(fixture("eventbridge_object_created.json"))
    assert result["objects"][0]["status"] == "published"
    assert result["objects"][0]["object"] == "s3://source/customer_data_log/café menu.parquet"


def test_sqs_batch_one_bad_file_does_not_block_the_others(world: World) -> None:
    for name, rows in (("a", ROWS), ("b", NULL_ROWS), ("c", ROWS)):
        world.objects.put("source", f"customer_data_log/{name}.parquet", rows)
    test_event = json.dumps({"Event": "s3:TestEvent"})
    event = sqs_event(*(s3_body(f"customer_data_log/{n}.parquet") for n in "abc"), test_event)
    result = world.invoke(event)
    assert result["batchItemFailures"] == []  # a rejected file is an outcome, its message is consumed
    assert [o["status"] for o in result["objects"]] == ["published", "rejected", "published"]
    assert len(rows_on(world.catalog, "main", "wap.customer_data_log")) == 2
    assert [a.kind for a in world.notifier.alerts] == [AlertKind.REJECTED]
    assert result["objects"][1]["failed_checks"][0]["target"] == "my_col_1"


def test_sqs_infrastructure_failure_is_a_partial_batch_failure(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.objects.put("source", "customer_data_log/ok.parquet", ROWS)
    world.objects.put("source", "broken_table/x.parquet", ROWS)
    failing_for(world, monkeypatch, "broken_table/", CatalogUnavailableError("Nessie is down"))
    result = world.invoke(sqs_event(s3_body("customer_data_log/ok.parquet"), s3_body("broken_table/x.parquet")))
    assert result["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    assert [o["status"] for o in result["objects"]] == ["published", "failed"]
    alert = world.notifier.alerts[-1]
    assert alert.kind is AlertKind.INFRASTRUCTURE and "not a data problem" in alert.summary
    assert "will be retried" in alert.summary


def test_infrastructure_alerts_on_first_and_last_attempt_only(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.objects.put("source", "customer_data_log/x.parquet", ROWS)
    world.writer.fail_with = CatalogUnavailableError("down")
    for attempt in (1, 2, 3):
        result = world.invoke(sqs_event(s3_body("customer_data_log/x.parquet"), receive_count=attempt))
        assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert len(world.notifier.alerts) == 2
    assert "dead-letter queue" in world.notifier.alerts[-1].summary


def test_poison_message_fails_and_is_alerted(world: World) -> None:
    result = world.invoke(sqs_event("this is not json", receive_count=3))
    assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert "cannot read" in world.notifier.alerts[0].title
    assert "dead-letter queue" in world.notifier.alerts[0].summary


def test_invalid_key_is_alerted_and_consumed(world: World) -> None:
    world.objects.put("source", "loose.parquet", ROWS)
    result = world.invoke(sqs_event(s3_body("loose.parquet")))
    assert result["batchItemFailures"] == []
    assert result["objects"][0]["status"] == "invalid"
    assert world.notifier.alerts[0].kind is AlertKind.INVALID


def test_direct_invocation_raises_after_processing_every_object(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.objects.put("source", "customer_data_log/my file ü.parquet", ROWS, **S3_PUT)
    world.writer.fail_with = CatalogUnavailableError("down")
    with pytest.raises(lambda_handler.InvocationFailedError, match="1 of 1 objects failed"):
        world.invoke(fixture("s3_put.json"))


def test_unknown_event_shape_is_refused(world: World) -> None:
    with pytest.raises(Exception, match="unrecognised event"):
        world.invoke({"hello": "world"})


def test_the_maintenance_schedule_maintains_every_table_and_fails_on_a_failed_one(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from wap_ingest.core.maintenance import MaintenanceReport, MaintenanceWork, TableHealth

    asked: list[Any] = []
    report = MaintenanceReport("wap.a", "maintained", MaintenanceWork(compact=True), TableHealth(data_files=9),
                               TableHealth(data_files=1), attempts=1)
    results: list[Any] = [report]
    monkeypatch.setattr(Service, "maintain", lambda self, table, **kw: asked.append((table, kw)) or results)
    assert world.invoke({"wap_maintain": "all"}) == {"maintained": [report.to_dict()]}
    [(table, kw)] = asked  # every table on main, here or on EMR by size, while the invocation has time left
    assert table is None and set(kw) == {"out_of_time"} and not kw["out_of_time"]()  # 600 s left, 90 s reserved
    results.append(CatalogUnavailableError("nessie down"))
    with pytest.raises(Exception, match="maintenance failed for 1 of 2 tables: nessie down"):
        world.invoke({"wap_maintain": "all"})


def test_the_maintenance_schedule_fails_when_a_tables_sweep_aborted(world: World,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from wap_ingest.core.lake_files import FilesSwept
    from wap_ingest.core.maintenance import MaintenanceReport, MaintenanceWork, TableHealth

    swept = FilesSwept("wap.a", "aborted", message="wap.a: the table metadata file s3://lake/m.json is not there")
    report = MaintenanceReport("wap.a", "nothing to do", MaintenanceWork(), TableHealth(), swept=swept)
    monkeypatch.setattr(Service, "maintain", lambda self, table, **kw: [report])
    with pytest.raises(Exception, match=re.escape("the sweep of unreferenced files aborted for 1 of 1 tables: wap.a: "
                                                  "the table metadata file s3://lake/m.json is not there")):
        world.invoke({"wap_maintain": "all"})


class Untouched(TableMaintainer):
    """A maintainer that must not be called: no time is left to start."""

    def health(self, table: Any, ref: str, small_file_bytes: int) -> Any:
        raise AssertionError(f"measured {table} on {ref} without time to maintain it")

    def maintain(self, table: Any, branch: str, work: Any, settings: Any, layout: Any) -> None:
        raise AssertionError("maintained without time left")

    def trim_snapshots(self, table: Any, branch: str, keep: int) -> int:
        raise AssertionError("trimmed without time left")


class LateContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 5_000  # below WAP_TIME_RESERVE_SECONDS (90 s)


def test_the_schedule_out_of_time_defers_maintenance_and_leaves_no_branch(world: World) -> None:
    """The invocation's deadline reaches maintenance (the transaction's guard): a table not started is deferred to
    the next schedule, which is no failure (the invocation succeeds), and nothing is branched or merged."""
    world.catalog.commit("main", {"wap": {"type": "namespace"}, "wap.orders": {"snapshots": [], "columns": ()}})
    main = world.catalog.refs["main"]
    world.service = world.service.replaced(maintainer=Untouched())
    answer = lambda_handler.handler({"wap_maintain": "all"}, LateContext())
    assert answer["maintained"] == [] and len(answer["deferred"]) == 1, answer
    assert "wap.orders" in answer["deferred"][0] and "out of time" in answer["deferred"][0]
    assert world.catalog.refs == {"main": main}


def test_the_schedule_resubmits_a_failed_emr_run_no_event_told_of_then_maintains(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = FakeJobs()
    world.service = world.service.replaced(large_files=LargeFiles(jobs, 1000))
    big = SourceObject("source", "customer_data_log/big.parquet", etag="e1")
    first = jobs.submit(big, TableRef("wap", "customer_data_log"))
    jobs.end(first)  # FAILED, and EMR's state-change event never reached the function
    monkeypatch.setattr(Service, "maintain", lambda self, table, **kw: [])

    answer = world.invoke({"wap_maintain": "all"})

    [again] = answer["emr_sweep"]["resubmitted"]
    assert (again["failed_run"], again["object"], again["attempt"]) == (first.job_run_id, big.uri, 2)
    assert [r.job_run_id for r in jobs.runs()] == [again["new_run"]] and answer["maintained"] == []
    assert world.invoke({"wap_maintain": "all"})["emr_sweep"]["resubmitted"] == []  # once: the new run lives
    # The event arriving late finds the new run: nothing is started twice.
    assert world.invoke(fixture("emr_job_run_failed.json") | {"detail": {
        "applicationId": "app-fake", "jobRunId": first.job_run_id, "state": "FAILED"}})["resubmitted"] is None
    assert jobs.attempts == {("wap.customer_data_log", big.identity): 2}


def test_a_sweep_that_fails_fails_the_schedule_after_maintenance_ran(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = FakeJobs()
    world.service = world.service.replaced(large_files=LargeFiles(jobs, 1000))
    monkeypatch.setattr(jobs, "sweep", lambda: (_ for _ in ()).throw(ObjectStoreUnavailableError("S3 is down")))
    maintained: list[Any] = []
    monkeypatch.setattr(Service, "maintain", lambda self, table, **kw: maintained.append(table) or [])

    with pytest.raises(Exception, match="the EMR sweep: S3 is down"):  # Lambda retries the schedule's event
        world.invoke({"wap_maintain": "all"})

    assert maintained == [None]


@pytest.mark.parametrize("shape", ["s3", "eventbridge", "sqs"])
def test_a_redelivered_event_of_every_shape_is_a_duplicate_found_in_the_ledger(world: World, shape: str) -> None:
    """Exactly once through each entry point of the function: the second delivery finds the ledger entry the first
    merge brought to main, and changes nothing."""
    world.objects.put("source", "customer_data_log/my file ü.parquet", ROWS, **S3_PUT)
    world.objects.put("source", "customer_data_log/café menu.parquet", ROWS, etag=EVENTBRIDGE_ETAG)
    event = {"s3": fixture("s3_put.json"), "eventbridge": fixture("eventbridge_object_created.json"),
             "sqs": sqs_event(s3_body("customer_data_log/a.parquet"))}[shape]
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    first = world.invoke(event)
    main = world.catalog.refs["main"]
    second = world.invoke(event)
    assert [o["status"] for o in first["objects"]] == ["published"]
    assert [o["status"] for o in second["objects"]] == ["duplicate"]
    assert world.catalog.refs["main"] == main and len(rows_on(world.catalog, "main", "wap.customer_data_log")) == 1
    assert any(k.startswith("wap_ledger.") for k in world.catalog.contents("main"))


class EndingJobs(LargeFileJobs):
    """A distributed engine that tells which runs ended (EventBridge), resubmitting the failed one."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []
        self.fail_with: Exception | None = None

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        raise AssertionError("nothing is submitted here")

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        return []

    def run_ended(self, application_id: str, job_run_id: str) -> JobRun | None:
        self.ended.append((application_id, job_run_id))
        if self.fail_with is not None:
            raise self.fail_with
        return JobRun("run-2", application_id, SourceObject("source", "t/big.parquet"), "wap.t", "SUBMITTED", "now")


def test_an_emr_run_that_failed_is_resubmitted_or_alerted_when_it_cannot_be(world: World) -> None:
    jobs = EndingJobs()
    world.service = world.service.replaced(large_files=LargeFiles(jobs, 1000))
    event = fixture("emr_job_run_failed.json")
    assert world.invoke(event) == {"job_run": "run-1", "state": "FAILED", "resubmitted": "run-2"}
    assert jobs.ended == [("00app", "run-1")]
    jobs.fail_with = JobRunsExhaustedError("EMR job runs for s3://source/t/big.parquet failed 3 time(s)")
    assert world.invoke(event)["error"].startswith("EMR job runs for s3://source/t/big.parquet failed 3 time(s)")
    [alert] = world.notifier.alerts
    assert "run-1 ended and was not resubmitted" in alert.title
    # Any other failure fails the invocation: Lambda retries the event (and the schedule's sweep is the backstop),
    # rather than a transient error being alerted as final.
    jobs.fail_with = ObjectStoreUnavailableError("S3 is down")
    with pytest.raises(ObjectStoreUnavailableError, match="S3 is down"):
        world.invoke(event)
    assert len(world.notifier.alerts) == 1
    event["detail"]["state"] = "SUCCESS"
    assert world.invoke(event)["resubmitted"] is None and len(jobs.ended) == 3  # a success is left alone


@pytest.mark.parametrize("shape", ["s3", "eventbridge", "sqs"])
def test_every_entry_point_asks_the_engine_to_start_once_and_not_for_a_refused_key(world: World, shape: str) -> None:
    """The engine's start overlaps the catalog steps before the first write, whichever way the event came; an
    object refused while routed (a key naming no table) starts nothing."""
    world.objects.put("source", "customer_data_log/my file ü.parquet", ROWS, **S3_PUT)
    world.objects.put("source", "customer_data_log/café menu.parquet", ROWS, etag=EVENTBRIDGE_ETAG)
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    event = {"s3": fixture("s3_put.json"), "eventbridge": fixture("eventbridge_object_created.json"),
             "sqs": sqs_event(s3_body("customer_data_log/a.parquet"))}[shape]
    assert [o["status"] for o in world.invoke(event)["objects"]] == ["published"]
    assert world.writer.starts == 1
    (spec, fmt), = world.writer.started_for[0]  # the file, with how its table is written, before its branch exists
    assert (spec.table.name, spec.branch, fmt) == ("customer_data_log", "", FileFormat.PARQUET)
    world.objects.put("source", "orphan.parquet", ROWS)
    world.invoke(sqs_event(s3_body("orphan.parquet")))
    assert world.writer.starts == 1
