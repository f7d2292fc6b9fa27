"""The invocation's deadline inside the long steps, on fakes through the Lambda handler: a download whose deadline
passes between its ranged parts stops (the real S3ObjectStore over an in-memory client), and a merge that keeps
conflicting stops retrying from main once the deadline passes. Either way the file is deferred (back to the queue
with its message's failure, no alert), its branch is deleted, nothing stays staged and main is untouched. The
deadline during Spark's write, on the real stack: tests/integration/adapters/aws/test_weights_and_deadline.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fake_catalog import FakeCatalog
from tests.fake_s3 import FakeS3Client
from tests.unit.entrypoints.test_lambda_handler import ROWS, Context, World, s3_body, sqs_event
from wap_ingest.adapters.aws import s3
from wap_ingest.adapters.aws.s3 import S3ObjectStore
from wap_ingest.bootstrap import FunctionUseCases
from wap_ingest.core.errors import DeferredError, MergeConflictError, OutOfTimeError
from wap_ingest.core.models import Branch
from wap_ingest.entrypoints import lambda_handler

KEY = "customer_data_log/big.parquet"
PARTS = 64


class Deadline(Context):
    """A Lambda context whose remaining time drops below the reserve (90 s) once `passed()` says so."""

    def __init__(self, passed: Callable[[], bool]) -> None:
        self.passed = passed

    def get_remaining_time_in_millis(self) -> int:
        return 1_000 if self.passed() else 600_000


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(w.service))
    monkeypatch.setattr(s3, "PART_BYTES", 1024)  # a 64 kB object is downloaded as 64 ranged parts
    return w


def with_namespace(catalog: FakeCatalog) -> str:
    """main as a running service's is (its namespace made by an earlier file): its hash, which must not move."""
    catalog.ensure_namespace("main", "wap")
    return catalog.refs["main"]


def deferred_without_a_trace(world: World, result: dict[str, Any], main_before: str) -> None:
    assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]  # back to the queue
    [summary] = result["objects"]
    assert summary["status"] == "deferred" and "nearly out of time" in summary["message"], summary
    assert world.notifier.alerts == []  # deferred, not failed: nobody is alerted
    assert world.catalog.list_branches("wap-") == []
    assert world.catalog.refs["main"] == main_before


def test_a_download_stops_between_parts_when_the_deadline_passes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    monkeypatch.setattr(s3, "PART_BYTES", 1024)
    source = world.objects.put("source", KEY, bytes(range(256)) * 4 * PARTS)
    client = FakeS3Client(world.objects)
    with pytest.raises(OutOfTimeError, match=r"staging stopped at byte \d+ of 65536") as caught:
        S3ObjectStore(client).download(source, tmp_path, stop=lambda: client.served >= 1)
    assert isinstance(caught.value, DeferredError)
    assert 1 <= client.served < PARTS and list(tmp_path.iterdir()) == []  # stopped early, nothing left on disk
    assert S3ObjectStore(client).download(source, tmp_path).read_bytes() == bytes(range(256)) * 4 * PARTS


def test_a_file_whose_deadline_passes_during_its_download_is_deferred_and_nothing_stays_staged(
        world: World, tmp_path: Path) -> None:
    world.objects.put("source", KEY, bytes(PARTS * 1024))
    client = FakeS3Client(world.objects)
    staging = tmp_path / "staging"
    world.writer.stage_with = lambda source, stop: S3ObjectStore(client).download(source, staging, stop)
    main_before = with_namespace(world.catalog)
    result = lambda_handler.handler(sqs_event(s3_body(KEY)), Deadline(lambda: client.served >= 1))
    assert "staging stopped at byte" in result["objects"][0]["message"]
    deferred_without_a_trace(world, result, main_before)
    assert 1 <= client.served < PARTS and list(staging.iterdir()) == []


class Contended(FakeCatalog):
    """Another writer wins every merge into main: each one conflicts."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0

    def merge(self, branch: Branch, onto: str, expected_hash: str, message: str, properties: Any) -> str:
        self.calls.append(f"merge {branch.name} -> {onto}")
        self.conflicts += 1
        raise MergeConflictError(f"{onto} changed wap.customer_data_log since {expected_hash[:8]}")


def test_a_merge_that_keeps_conflicting_stops_retrying_once_the_deadline_passes(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    world = World()
    catalog = Contended()
    world.catalog = world.writer.catalog = catalog
    world.service = world.service.replaced(ports=replace(world.service.ports, catalog=catalog))
    monkeypatch.setattr(lambda_handler, "function", lambda: FunctionUseCases(world.service))
    world.objects.put("source", "customer_data_log/a.parquet", ROWS)
    main_before = with_namespace(catalog)
    result = lambda_handler.handler(sqs_event(s3_body("customer_data_log/a.parquet")),
                                    Deadline(lambda: catalog.conflicts >= 2))
    assert catalog.conflicts == 2 < world.service.config.merge_attempts  # not the 20 attempts a retry may take
    assert "not started, the invocation is nearly out of time" in result["objects"][0]["message"]
    deferred_without_a_trace(world, result, main_before)
    assert len([c for c in catalog.calls if c.startswith("delete_branch")]) == 2  # each attempt's branch
