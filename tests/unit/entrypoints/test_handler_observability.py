"""What the Lambda handler tells CloudWatch: one EMF metrics document per invocation (one test per
outcome), and a correlation id per object on its log lines and in its alert."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tests.unit.entrypoints.test_lambda_handler import NULL_ROWS, ROWS, World, s3_body, sqs_event
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.errors import CatalogUnavailableError, MergeConflictError
from wap_ingest.entrypoints import lambda_handler

STAGES = ("RouteDuration", "BranchDuration", "AppendDuration", "AuditDuration", "MergeDuration")


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    return w


def emf(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The one EMF document the invocation printed, each metric's values as a list (one per object)."""
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                 if line.startswith("{") and "_aws" in line]
    assert len(documents) == 1, documents
    document: dict[str, Any] = documents[0]
    for name in metric_names(document):
        document[name] = document[name] if isinstance(document[name], list) else [document[name]]
    return document


def metric_names(document: dict[str, Any]) -> dict[str, str]:
    [directive] = document["_aws"]["CloudWatchMetrics"]
    return {m["Name"]: m["Unit"] for m in directive["Metrics"]}


def invoke_one(world: World, key: str, receive_count: int = 1) -> dict[str, Any]:
    return world.invoke(sqs_event(s3_body(key), receive_count=receive_count))


def test_published_counts_rows_and_stage_durations(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    invoke_one(world, "customer_data_log/a.parquet")
    document = emf(capsys)
    [directive] = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "wap-lake" and document["service"] == "wap-ingest"
    assert document["message"] == "metrics"  # every JSON line of the function's log has a message
    assert document["FilesPublished"] == [1] and document["RowsAppended"] == [1] and document["MergeRetries"] == [0]
    units = metric_names(document)
    assert units["FilesPublished"] == "Count" and units["RowsAppended"] == "Count"
    for stage in STAGES:
        assert units[stage] == "Milliseconds" and document[stage][0] >= 0


def test_rejected(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.objects.put("source", "customer_data_log/b.parquet", NULL_ROWS)
    invoke_one(world, "customer_data_log/b.parquet")
    document = emf(capsys)
    assert document["FilesRejected"] == [1] and document["RowsAppended"] == [1]
    assert "FilesPublished" not in document and "MergeDuration" not in document


def test_invalid(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.objects.put("source", "loose.parquet", ROWS)
    invoke_one(world, "loose.parquet")
    document = emf(capsys)
    assert document["FilesInvalid"] == [1] and "RowsAppended" not in document


def test_failed_and_the_invocation_still_flushes(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.objects.put("source", "customer_data_log/x.parquet", ROWS)
    world.writer.fail_with = CatalogUnavailableError("down")
    result = invoke_one(world, "customer_data_log/x.parquet")
    assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert emf(capsys)["FilesFailed"] == [1]


def test_duplicate(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    invoke_one(world, "customer_data_log/a.parquet")
    capsys.readouterr()
    invoke_one(world, "customer_data_log/a.parquet")
    document = emf(capsys)
    assert document["DuplicatesSkipped"] == [1] and "FilesPublished" not in document


def test_merge_retries(world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    original, conflicts = world.catalog.merge, [2]

    def conflicting(*args: Any, **kwargs: Any) -> str:
        if conflicts[0]:
            conflicts[0] -= 1
            raise MergeConflictError("main changed the table")
        return original(*args, **kwargs)

    monkeypatch.setattr(world.catalog, "merge", conflicting)
    invoke_one(world, "customer_data_log/a.parquet")
    document = emf(capsys)
    assert document["FilesPublished"] == [1] and document["MergeRetries"] == [2]


def test_batch_is_one_document_with_a_value_per_object(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    for name, rows in (("a", ROWS), ("b", NULL_ROWS), ("c", ROWS)):
        world.objects.put("source", f"customer_data_log/{name}.parquet", rows)
    world.invoke(sqs_event(*(s3_body(f"customer_data_log/{n}.parquet") for n in "abc")))
    document = emf(capsys)
    assert document["FilesPublished"] == [1, 1] and document["FilesRejected"] == [1]


def test_metrics_failure_never_fails_the_invocation(world: World, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("metrics are broken")

    monkeypatch.setattr(lambda_handler.metrics._metrics, "add_metric", broken)
    monkeypatch.setattr(lambda_handler.metrics._metrics, "flush_metrics", broken)
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    assert invoke_one(world, "customer_data_log/a.parquet")["objects"][0]["status"] == "published"


def test_correlation_id_in_the_summary_and_the_alert(world: World) -> None:
    world.objects.put("source", "customer_data_log/b.parquet", NULL_ROWS)
    result = invoke_one(world, "customer_data_log/b.parquet")
    correlation_id = "m0:customer_data_log/b.parquet"  # the SQS message id and the key: stable across retries
    assert result["objects"][0]["correlation_id"] == correlation_id
    assert ("Correlation id", correlation_id) in world.notifier.alerts[0].fields


def test_correlation_id_on_every_line_about_the_object(world: World) -> None:
    """The handler's lines and the core's (which share the handler's JSON handler and appended keys)."""
    handler = lambda_handler.logger.registered_handler
    sink = io.StringIO()
    previous = handler.setStream(sink)  # type: ignore[attr-defined]
    try:
        world.objects.put("source", "customer_data_log/b.parquet", NULL_ROWS)
        invoke_one(world, "customer_data_log/b.parquet")
    finally:
        handler.setStream(previous)  # type: ignore[attr-defined]
    lines = [json.loads(line) for line in sink.getvalue().splitlines() if line.startswith("{")]
    about = [line for line in lines if line.get("object_key") == "customer_data_log/b.parquet"]
    [outcome] = [line for line in about if line["message"] == "outcome"]
    assert outcome["correlation_id"] == "m0:customer_data_log/b.parquet" and outcome["status"] == "rejected"
    core = [line for line in about if line.get("name", "").startswith("wap_ingest.core")]
    assert core and all(line["correlation_id"] == outcome["correlation_id"] for line in about)


def test_infrastructure_alert_carries_the_correlation_id(world: World) -> None:
    world.objects.put("source", "customer_data_log/x.parquet", ROWS)
    world.writer.fail_with = CatalogUnavailableError("down")
    invoke_one(world, "customer_data_log/x.parquet")
    assert ("Correlation id", "m0:customer_data_log/x.parquet") in world.notifier.alerts[0].fields
