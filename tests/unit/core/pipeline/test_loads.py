"""Multi-table atomic loads in the core (core.loads), with the fakes: one manifest, one branch, one merge for every
table or none; the files under _pending/ wait for their manifest; exactly once by the files' identities. Against the
real Spark and Nessie: tests/integration/core/pipeline/test_loads.py."""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeCatalog, FakeEventSink, FakeNotifier, FakeObjectStore, FakeWriter, rows_on
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports

SUITES = suites_from({"tables": {
    "orders": [{"check": "not_null", "columns": ["id"]}],
    "lines": [{"check": "not_null", "columns": ["order_id"]}],
    "sales.orders": [{"check": "not_null", "columns": ["id"]}],
}}, default_namespace="wap")


class Lake:
    def __init__(self) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.ports = Ports(catalog=self.catalog, writer=FakeWriter(self.catalog, self.objects), objects=self.objects)
        self.notifier, self.events = FakeNotifier(), FakeEventSink()

    def put(self, key: str, content: object) -> SourceObject:
        return self.objects.put("source", key, content)  # type: ignore[arg-type]

    def ingest(self, *sources: SourceObject) -> list[IngestOutcome]:
        results = ingest([Item(s) for s in sources], ports=self.ports, suites=SUITES,
                         config=PipelineConfig(default_namespace="wap"), notifier=self.notifier, events=self.events)
        assert all(isinstance(r, IngestOutcome) for r in results), results
        return results  # type: ignore[return-value]


@pytest.fixture
def lake() -> Lake:
    return Lake()


def manifest(lake: Lake, name: str, files: list[object]) -> SourceObject:
    return lake.put(f"_loads/{name}.json", json.dumps({"files": files}).encode())


def two_tables(lake: Lake, bad_line: bool = False) -> list[SourceObject]:
    return [lake.put("_pending/orders/o.parquet", [{"id": 1}, {"id": 2}]),
            lake.put("_pending/lines/l.parquet", [{"order_id": None if bad_line else 1}, {"order_id": 2}])]


def test_the_pending_files_wait_and_the_manifest_publishes_both_tables_in_one_merge(lake: Lake) -> None:
    files = two_tables(lake)
    assert [o.status for o in lake.ingest(*files)] == [OutcomeStatus.WAITING] * 2  # their own notifications
    assert lake.catalog.publications(TableRef("wap", "orders")) == []
    [outcome] = lake.ingest(manifest(lake, "day1", ["_pending/orders/o.parquet",
                                                    {"key": "_pending/lines/l.parquet", "table": "lines"}]))
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.rows == 4 and outcome.table == "wap.lines, wap.orders"
    [orders_merge] = lake.catalog.publications(TableRef("wap", "orders"))
    [lines_merge] = lake.catalog.publications(TableRef("wap", "lines"))
    assert orders_merge.hash == lines_merge.hash == outcome.merged_hash  # one commit for both tables
    assert orders_merge.properties[lineage.LOAD] == "s3://source/_loads/day1.json"
    assert len(rows_on(lake.catalog, "main", "wap.orders")) == 2
    assert len(rows_on(lake.catalog, "main", "wap.lines")) == 2
    assert [p.status for p in outcome.parts] == [OutcomeStatus.PUBLISHED] * 2
    [event] = lake.events.events
    assert event.detail_type == "Load Published" and event.detail["tables"] == ["wap.orders", "wap.lines"]
    assert lake.catalog.list_branches("wap-") == []
    [again] = lake.ingest(manifest(lake, "day1-again", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"]))
    assert again.status is OutcomeStatus.DUPLICATE  # every file of it is on main already


def test_a_failing_table_publishes_neither_and_one_alert_lists_each_file(lake: Lake) -> None:
    two_tables(lake, bad_line=True)
    [outcome] = lake.ingest(manifest(lake, "day2", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"]))
    assert outcome.status is OutcomeStatus.REJECTED and outcome.branch in {
        b.name for b in lake.catalog.list_branches("wap-")}
    assert rows_on(lake.catalog, "main", "wap.orders") == [] and rows_on(lake.catalog, "main", "wap.lines") == []
    assert len(rows_on(lake.catalog, outcome.branch, "wap.orders")) == 2  # type: ignore[arg-type]
    [alert] = lake.notifier.alerts
    assert "not published" in alert.title and len(alert.details) == 2
    assert any("wap.lines" in d and "FAILED" in d for d in alert.details)
    assert any("wap.orders" in d and "passed" in d for d in alert.details)


@pytest.mark.parametrize(
    ("body", "phrase"),
    [(b"{not json", "not JSON"), (b'{"files": []}', "lists no files"),
     (json.dumps({"files": ["orders/o.parquet"]}).encode(), "not a key under _pending/"),
     (json.dumps({"files": ["_pending/orders/missing.parquet"]}).encode(), "no such object"),
     (json.dumps({"files": ["_pending/orders/o.xlsx"]}).encode(), "unsupported file type")],
)
def test_a_bad_manifest_is_invalid_and_names_the_fix(lake: Lake, body: bytes, phrase: str) -> None:
    lake.put("_pending/orders/o.xlsx", b"PK")
    [outcome] = lake.ingest(lake.put("_loads/bad.json", body))
    assert outcome.status is OutcomeStatus.INVALID and phrase in outcome.message, outcome.message
    assert lake.catalog.list_branches("wap-") == []


def test_a_load_whose_file_was_published_apart_is_refused(lake: Lake) -> None:
    two_tables(lake)
    lake.ingest(manifest(lake, "only-orders", ["_pending/orders/o.parquet"]))
    [outcome] = lake.ingest(manifest(lake, "both", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"]))
    assert outcome.status is OutcomeStatus.INVALID and "1 of its 2 files are on main already" in outcome.message
    assert rows_on(lake.catalog, "main", "wap.lines") == []


def test_a_large_load_goes_to_the_distributed_engine_under_its_first_table(lake: Lake) -> None:
    from tests.fakes import FakeJobs
    from wap_ingest.core.ingest import LargeFiles

    two_tables(lake)
    source = manifest(lake, "big", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"])
    jobs = FakeJobs()
    [outcome] = ingest([Item(source)], ports=lake.ports, suites=SUITES, config=PipelineConfig(default_namespace="wap"),
                       notifier=lake.notifier, large_files=LargeFiles(jobs, threshold_bytes=100))
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.SUBMITTED
    [(submitted, table)] = [(r.source, r.table) for r in jobs.runs()]
    assert submitted.key == "_loads/big.json" and table == "wap.lines"  # the load's first table keeps the record
    assert lake.catalog.list_branches("wap-") == []  # nothing was written here


def test_a_dry_run_or_any_routing_refuses_a_loads_file_alone(lake: Lake) -> None:
    from wap_ingest.core.pipeline import run_wap

    source = lake.put("_pending/orders/o.parquet", [{"id": 1}])
    [outcome] = run_wap([source], ports=lake.ports, suites=SUITES, config=PipelineConfig(default_namespace="wap"),
                        dry_run=True)
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.INVALID
    assert "belongs to a multi-table load" in outcome.message and lake.catalog.list_branches("wap-") == []


def test_a_file_that_does_not_fit_its_table_makes_the_load_invalid_and_leaves_no_branch(lake: Lake) -> None:
    lake.put("_pending/orders/o.parquet", [{"id": 1}])
    lake.ingest(manifest(lake, "first", ["_pending/orders/o.parquet"]))
    lake.put("_pending/orders/wide.parquet", [{"id": 2, "extra": "x"}])  # a column the table does not have
    lake.put("_pending/lines/l.parquet", [{"order_id": 2}])
    [outcome] = lake.ingest(manifest(lake, "second", ["_pending/orders/wide.parquet", "_pending/lines/l.parquet"]))
    assert outcome.status is OutcomeStatus.INVALID and "nothing of it was published" in outcome.message
    assert lake.catalog.list_branches("wap-") == [] and rows_on(lake.catalog, "main", "wap.lines") == []


def test_a_new_namespace_reaches_main_only_with_the_loads_merge(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load into a namespace main does not have yet: the namespace is made on the load's branch and reaches main
    with the merge of the audited rows, never committed to main directly; a rejected load leaves it off main."""
    from wap_ingest.core.branches import RunKind, parse_branch

    made_on: list[str] = []
    ensure = lake.catalog.ensure_namespace
    monkeypatch.setattr(lake.catalog, "ensure_namespace", lambda on, ns: made_on.append(f"{ns}@{on}") or ensure(on, ns))
    lake.put("_pending/sales/bad.parquet", [{"id": None}])
    [rejected] = lake.ingest(manifest(lake, "bad", [{"key": "_pending/sales/bad.parquet", "table": "sales.orders"}]))
    assert rejected.status is OutcomeStatus.REJECTED and rejected.branch is not None
    assert lake.catalog.has_namespace(rejected.branch, "sales") and not lake.catalog.has_namespace("main", "sales")
    lake.put("_pending/sales/o.parquet", [{"id": 1}])
    lake.put("_pending/orders/o.parquet", [{"id": 2}])
    [outcome] = lake.ingest(manifest(lake, "good", [{"key": "_pending/sales/o.parquet", "table": "sales.orders"},
                                                     "_pending/orders/o.parquet"]))
    assert outcome.status is OutcomeStatus.PUBLISHED and lake.catalog.has_namespace("main", "sales")
    assert [m for m in made_on if m.endswith("@main")] == ["wap_ledger@main"]  # main's first commit: the ledger's
    runs = [parse_branch(m.split("@", 1)[1]) for m in made_on if m.startswith("sales@")]
    assert len(runs) == 2 and all(r is not None and r.kind is RunKind.LOAD for r in runs)
    introduced, cursor = [], lake.catalog.refs["main"]  # the commits of main that brought `sales` there
    while cursor is not None:
        commit = lake.catalog.commits[cursor]
        introduced += [cursor] if "sales" in commit.changed else []
        cursor = commit.parent
    assert introduced == [outcome.merged_hash] and len(rows_on(lake.catalog, "main", "sales.orders")) == 1


def run_load(lake: Lake, source: SourceObject, **config: object) -> object:
    from wap_ingest.core.pipeline import Load

    out_of_time = config.pop("out_of_time", lambda: False)
    load = Load(lake.ports, SUITES, PipelineConfig(default_namespace="wap", sleep=lambda _s: None, **config),
                out_of_time=out_of_time)  # type: ignore[arg-type]
    return load.run(source)


def test_a_load_retries_from_main_on_the_same_errors_as_a_file(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """One retry set for every run (the transaction's): a branch that vanished or a main that moved are retried
    from a fresh main, as a merge conflict is."""
    from wap_ingest.core.errors import BranchNotFoundError, StaleHashError

    two_tables(lake)
    load = manifest(lake, "day1", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"])
    failures = iter([BranchNotFoundError("gone"), StaleHashError("moved")])
    real = lake.catalog.merge

    def flaky(*args: object, **kwargs: object) -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lake.catalog, "merge", flaky)
    outcome = run_load(lake, load)
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.PUBLISHED and outcome.attempts == 3
    assert lake.catalog.list_branches("wap-") == []


def test_a_load_checks_the_time_left_before_each_file_and_leaves_no_branch(lake: Lake) -> None:
    from wap_ingest.core.errors import OutOfTimeError

    two_tables(lake)
    load = manifest(lake, "day1", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"])
    answers = iter([False, True])  # time for the attempt and its first file, not for the second file
    outcome = run_load(lake, load, out_of_time=lambda: next(answers, True))
    assert isinstance(outcome, OutOfTimeError) and "_pending/lines/l.parquet" in str(outcome)
    assert lake.catalog.list_branches("wap-") == [] and lake.catalog.publications(TableRef("wap", "orders")) == []


def test_a_load_checks_the_disk_before_each_file(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for the first file, none left once it is staged: the check before the second file defers the load,
    after the first was written on the branch, and nothing of it is left."""
    from wap_ingest.core.errors import OverBudgetError

    two_tables(lake)
    load = manifest(lake, "day1", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"])
    written: list[str] = []
    append = lake.ports.writer.append
    monkeypatch.setattr(lake.ports.writer, "append", lambda spec, source, fmt: written.append(source.key) or append(
        spec, source, fmt))
    outcome = run_load(lake, load, free_bytes=lambda: 0 if written else 10**9)  # the first file fills the disk
    assert isinstance(outcome, OverBudgetError) and "_pending/lines/l.parquet" in str(outcome), outcome
    assert written == ["_pending/orders/o.parquet"]  # the first file was staged: the check ran again, before the second
    assert lake.catalog.list_branches("wap-") == [] and lake.catalog.publications(TableRef("wap", "orders")) == []
    assert rows_on(lake.catalog, "main", "wap.orders") == [] and rows_on(lake.catalog, "main", "wap.lines") == []


def test_a_branch_that_cannot_be_deleted_after_the_merge_is_noted_not_raised(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wap_ingest.core.errors import CatalogUnavailableError

    two_tables(lake)
    load = manifest(lake, "day1", ["_pending/orders/o.parquet", "_pending/lines/l.parquet"])

    def down(_branch: object) -> None:
        raise CatalogUnavailableError("Nessie is unreachable")

    monkeypatch.setattr(lake.catalog, "delete_branch", down)
    outcome = run_load(lake, load)
    assert isinstance(outcome, IngestOutcome) and outcome.status is OutcomeStatus.PUBLISHED
    assert "could not be deleted and is left open" in outcome.message
    assert len(rows_on(lake.catalog, "main", "wap.orders")) == 2
