"""Routing in one place (core/routing.py), on fakes: `Router.place` says the function, EMR or refuse for any object (a
file, a load's manifest, a load's file), routing every file and every manifest entry with the same rules, and the
large-file threshold is compared in `where_for` only; every path (the function's ingest, `wap audit`'s dry run, a
load run by itself) places its objects through it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeJobs, FakeNotifier, FakeObjectStore, FakeWriter
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import ObjectStoreUnavailableError
from wap_ingest.core.ingest import Item, LargeFiles, ingest
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import Load, PipelineConfig, Ports, run_wap
from wap_ingest.core.routing import Placed, Router, Where, where_for

SUITES = suites_from({"defaults": [{"check": "row_count", "min": 1}]}, default_namespace="wap")
ROWS = [{"id": 1}]


def router(objects: FakeObjectStore, large_file_bytes: int | None = None) -> Router:
    return Router(objects, SUITES, "wap", frozenset({"source"}), frozenset({"lake"}), 100.0, large_file_bytes)


def manifest(objects: FakeObjectStore, name: str, files: list[Any]) -> SourceObject:
    return objects.put("source", f"_loads/{name}.json", json.dumps({"files": files}).encode())


def test_the_threshold_is_compared_in_one_place() -> None:
    assert [where_for(n, 100) for n in (99, 100, 101)] == [Where.FUNCTION, Where.FUNCTION, Where.EMR]
    assert where_for(10**12, None) is Where.FUNCTION  # no EMR (or the EMR job itself): here


def test_a_file_runs_here_or_on_emr_by_what_it_inflates_to() -> None:
    objects = FakeObjectStore()
    small = objects.put("source", "orders/a.csv.gz", ROWS)
    big = objects.put("source", "orders/b.csv.gz", ROWS)
    objects.inflates["orders/b.csv.gz"] = (big.size or 0) * 50
    here, there = router(objects, 1000).place(small), router(objects, 1000).place(big)
    assert (here.where, there.where) == (Where.FUNCTION, Where.EMR)
    assert here.routed is not None and here.routed.table == TableRef("wap", "orders") and here.routed.seconds >= 0
    assert there.routed is not None and there.routed.processed == (big.size or 0) * 50 and there.result is None


@pytest.mark.parametrize(("bucket", "key", "status", "said"), [
    ("lake", "orders/a.parquet", OutcomeStatus.INVALID, "not a source bucket"),
    ("source", "orders/a.exe", OutcomeStatus.INVALID, "a.exe"),
    ("source", "_pending/orders/a.parquet", OutcomeStatus.WAITING, "ingested with the manifest"),
])
def test_what_is_not_run_is_refused_with_its_outcome(bucket: str, key: str, status: OutcomeStatus, said: str) -> None:
    objects = FakeObjectStore()
    objects.put(bucket, key, ROWS)
    placed = router(objects, 1000).place(SourceObject(bucket, key))
    assert placed.where is Where.REFUSED and placed.routed is None
    assert isinstance(placed.result, IngestOutcome) and placed.result.status is status and said in placed.result.message


def test_a_load_is_placed_by_its_files_together_each_routed_as_a_file_is() -> None:
    objects = FakeObjectStore()
    for key in ("_pending/orders/o.parquet", "_pending/lines/l.parquet"):
        objects.put("source", key, ROWS)
    load = manifest(objects, "day", ["_pending/orders/o.parquet", {"key": "_pending/lines/l.parquet",
                                                                   "table": "sales.lines"}])
    together = sum((objects.head("source", k).size or 0) for k in ("_pending/orders/o.parquet",
                                                                    "_pending/lines/l.parquet"))
    here, there = router(objects, together).place(load), router(objects, together - 1).place(load)
    assert (here.where, there.where) == (Where.FUNCTION, Where.EMR)
    assert [f.table.qualified for f in here.files] == ["wap.orders", "sales.lines"]
    assert here.routed is not None and here.routed.source.key == "_loads/day.json"
    assert here.routed.table == TableRef("sales", "lines") and here.routed.processed == together  # its first table


def test_a_manifest_entry_is_refused_by_the_same_rules_as_a_file_and_the_whole_load_with_it() -> None:
    objects = FakeObjectStore()
    objects.put("source", "_pending/orders/o.parquet", ROWS)
    load = manifest(objects, "bad", ["_pending/orders/o.parquet", {"key": "_pending/orders/o.parquet",
                                                                   "table": "wap_ledger.entries"}])
    placed = router(objects).place(load)
    assert placed.where is Where.REFUSED and isinstance(placed.result, IngestOutcome)
    assert placed.result.status is OutcomeStatus.INVALID and placed.result.source.key == "_loads/bad.json"


def test_a_dry_run_refuses_a_loads_file_or_manifest_alone_and_a_failing_store_is_the_error() -> None:
    objects = FakeObjectStore()
    objects.put("source", "_pending/orders/o.parquet", ROWS)
    alone = router(objects).place(SourceObject("source", "_pending/orders/o.parquet"), loads=False)
    assert isinstance(alone.result, IngestOutcome) and "belongs to a multi-table load" in alone.result.message

    class Down(FakeObjectStore):
        def head(self, bucket: str, key: str, version_id: str | None = None) -> SourceObject:
            raise ObjectStoreUnavailableError("S3 is unreachable")

    failed = router(Down()).place(SourceObject("source", "orders/a.parquet"))
    assert failed.where is Where.REFUSED and isinstance(failed.result, ObjectStoreUnavailableError)
    gone = router(objects).place(SourceObject("source", "orders/none.parquet"))
    assert isinstance(gone.result, IngestOutcome) and gone.result.status is OutcomeStatus.INVALID


def test_every_path_places_its_objects_through_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    """The function's ingest (files and loads), a dry run and a load run by itself all ask Router.place (or, for a
    load, place_load): no other routing is left."""
    asked: list[str] = []
    place, place_load = Router.place, Router.place_load

    def spying(self: Router, source: SourceObject, table: TableRef | None = None, *, loads: bool = True) -> Placed:
        asked.append(f"place {source.key}")
        return place(self, source, table, loads=loads)

    def spying_load(self: Router, manifest_: SourceObject) -> Placed:
        asked.append(f"load {manifest_.key}")
        return place_load(self, manifest_)

    monkeypatch.setattr(Router, "place", spying)
    monkeypatch.setattr(Router, "place_load", spying_load)
    catalog, objects = FakeCatalog(), FakeObjectStore()
    ports = Ports(catalog=catalog, writer=FakeWriter(catalog, objects), objects=objects)
    config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)
    objects.put("source", "orders/a.parquet", ROWS)
    objects.put("source", "_pending/orders/o.parquet", ROWS)
    load = manifest(objects, "day", ["_pending/orders/o.parquet"])
    results = ingest([Item(objects.head("source", "orders/a.parquet")), Item(load)], ports=ports, suites=SUITES,
                     config=config, notifier=FakeNotifier(), large_files=LargeFiles(FakeJobs(), 10**9))
    assert [r.status for r in results if isinstance(r, IngestOutcome)] == [OutcomeStatus.PUBLISHED] * 2
    run_wap([objects.head("source", "orders/a.parquet")], ports=ports, suites=SUITES, config=config, dry_run=True)
    Load(ports, SUITES, config).run(load)
    assert asked == ["place orders/a.parquet", "place _loads/day.json", "load _loads/day.json",
                     "place orders/a.parquet", "load _loads/day.json"]
