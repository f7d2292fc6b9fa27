"""The pipeline's groups (core.pipeline) on in-memory fakes: one merge per table for a burst, each file its own fate."""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeBatchWriter, FakeCatalog, FakeObjectStore, Unreadable, rows_on, run_one
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import CatalogUnavailableError, MergeConflictError, OutOfTimeError, WapError
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, SourceObject
from wap_ingest.core.pipeline import PipelineConfig, Ports, run_wap

SUITES = suites_from(
    {"tables": {"customer_data_log": [{"check": "not_null", "columns": ["my_col_1"]},
                                      {"check": "row_count", "min": 1}]}},
    default_namespace="wap",
)
TABLE = "wap.customer_data_log"


def rows(n: int, nulls: int = 0, start: int = 0) -> list[dict[str, object]]:
    return [{"my_col_0": start + i, "my_col_1": None if i < nulls else f"v{i}"} for i in range(n)]


class Lake:
    def __init__(self) -> None:
        self.catalog = FakeCatalog()
        self.objects = FakeObjectStore()
        self.writer = FakeBatchWriter(self.catalog, self.objects)
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _: None)

    @property
    def ports(self) -> Ports:
        return Ports(catalog=self.catalog, writer=self.writer, objects=self.objects)

    def put(self, key: str, content: object) -> SourceObject:
        return self.objects.put("source", key, content)  # type: ignore[arg-type]

    def run(self, sources: list[SourceObject], **kwargs: object) -> list[IngestOutcome | WapError]:
        return run_wap(sources, ports=self.ports, suites=SUITES, config=self.config, **kwargs)  # type: ignore[arg-type]

    def merges(self) -> list[str]:
        return [c for c in self.catalog.calls if c.startswith("merge ")]


@pytest.fixture
def lake() -> Lake:
    return Lake()


def _outcomes(results: list[IngestOutcome | WapError]) -> list[IngestOutcome]:
    assert all(isinstance(r, IngestOutcome) for r in results), results
    return [r for r in results if isinstance(r, IngestOutcome)]


def test_a_burst_for_one_table_is_one_write_and_one_merge(lake: Lake) -> None:
    sources = [lake.put(f"customer_data_log/f{i}.csv", rows(3, start=10 * i)) for i in range(5)]
    outcomes = _outcomes(lake.run(sources))
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED] * 5
    assert [o.rows for o in outcomes] == [3] * 5
    assert lake.writer.batches == [5] and len(lake.merges()) == 1
    assert len(rows_on(lake.catalog, "main", TABLE)) == 15
    assert lake.catalog.list_branches("wap-") == []
    merge = lake.catalog.commits[lake.catalog.refs["main"]]
    published = json.loads(merge.properties["wap.sources"])
    assert [p["key"] for p in published] == [f"customer_data_log/f{i}.csv" for i in range(5)]
    assert merge.properties["wap.rows"] == "15" and merge.properties["wap.files"] == "5"


def test_files_published_in_a_batch_are_duplicates_afterwards_alone_or_in_a_batch(lake: Lake) -> None:
    sources = [lake.put(f"customer_data_log/f{i}.csv", rows(3, start=10 * i)) for i in range(3)]
    lake.run(sources)
    again = _outcomes(lake.run(sources))
    assert [o.status for o in again] == [OutcomeStatus.DUPLICATE] * 3
    assert [o.rows for o in again] == [3, 3, 3]
    alone = run_one(sources[1], ports=lake.ports, suites=SUITES, config=lake.config)
    assert alone.status is OutcomeStatus.DUPLICATE  # the one-file path finds a file a batch published
    assert len(rows_on(lake.catalog, "main", TABLE)) == 9


def test_a_bad_file_is_rejected_alone_on_its_own_branch_and_the_good_ones_publish(lake: Lake) -> None:
    good = [lake.put(f"customer_data_log/g{i}.csv", rows(4, start=10 * i)) for i in range(3)]
    bad = lake.put("customer_data_log/bad.csv", rows(4, nulls=2, start=100))
    outcomes = _outcomes(lake.run([good[0], bad, good[1], good[2]]))
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED, OutcomeStatus.REJECTED,
                                            OutcomeStatus.PUBLISHED, OutcomeStatus.PUBLISHED]
    rejected = outcomes[1]
    assert rejected.report is not None and not rejected.report.passed and rejected.branch
    assert len(rows_on(lake.catalog, "main", TABLE)) == 12
    # the rejected file's branch holds its rows on top of main: 12 published + its 4
    assert len(rows_on(lake.catalog, rejected.branch, TABLE)) == 16
    assert [b.name for b in lake.catalog.list_branches("wap-")] == [rejected.branch]


def test_unreadable_and_odd_files_run_alone_with_their_own_outcome(lake: Lake) -> None:
    good = [lake.put(f"customer_data_log/g{i}.csv", rows(2, start=10 * i)) for i in range(3)]
    broken = lake.put("customer_data_log/broken.csv", Unreadable())
    odd = lake.put("customer_data_log/odd.csv", [{"other": 1}])
    unrouted = lake.put("Bad-Key.csv", rows(2))
    outcomes = _outcomes(lake.run([*good, broken, odd, unrouted]))
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED] * 3 + [OutcomeStatus.INVALID] * 3
    assert lake.writer.batches == [3]
    assert len(rows_on(lake.catalog, "main", TABLE)) == 6


def test_two_tables_in_one_delivery_are_two_batches(lake: Lake) -> None:
    a = [lake.put(f"customer_data_log/a{i}.csv", rows(1, start=i)) for i in range(2)]
    b = [lake.put(f"orders/b{i}.csv", [{"id": i}]) for i in range(3)]
    outcomes = _outcomes(lake.run([a[0], b[0], a[1], b[1], b[2]]))
    assert all(o.status is OutcomeStatus.PUBLISHED for o in outcomes)
    assert sorted(lake.writer.batches) == [2, 3] and len(lake.merges()) == 2


def test_a_conflicting_merge_restarts_the_batch_from_main(lake: Lake) -> None:
    sources = [lake.put(f"customer_data_log/f{i}.csv", rows(2, start=10 * i)) for i in range(3)]
    real_merge = lake.catalog.merge
    calls = {"n": 0}

    def merge_once_conflicting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise MergeConflictError("main changed")
        return real_merge(*args, **kwargs)

    lake.catalog.merge = merge_once_conflicting  # type: ignore[method-assign]
    outcomes = _outcomes(lake.run(sources))
    assert all(o.status is OutcomeStatus.PUBLISHED and o.attempts == 2 for o in outcomes)
    assert len(rows_on(lake.catalog, "main", TABLE)) == 6
    assert lake.catalog.list_branches("wap-") == []


def test_an_infrastructure_failure_fails_the_unsettled_files_and_touches_nothing(lake: Lake) -> None:
    sources = [lake.put(f"customer_data_log/f{i}.csv", rows(2, start=10 * i)) for i in range(3)]
    lake.writer.fail_with = CatalogUnavailableError("nessie down")
    results = lake.run(sources)
    assert all(isinstance(r, CatalogUnavailableError) for r in results)
    assert rows_on(lake.catalog, "main", TABLE) == []
    assert lake.catalog.list_branches("wap-") == []


def test_out_of_time_hands_back_the_files_not_started(lake: Lake) -> None:
    a = lake.put("customer_data_log/a.csv", rows(2))
    b = [lake.put(f"orders/b{i}.csv", [{"id": i}]) for i in range(2)]
    answers = iter([False, True])  # time for the first group, not for the second
    results = lake.run([a, *b], out_of_time=lambda: next(answers, True))
    assert isinstance(results[0], IngestOutcome) and results[0].status is OutcomeStatus.PUBLISHED
    assert all(isinstance(r, OutOfTimeError) for r in results[1:])
    assert "orders" not in str(lake.catalog.contents("main"))


def test_the_history_of_loads_counts_each_file_of_a_batch_merge() -> None:
    from wap_ingest.core.lineage import load_rows
    from wap_ingest.core.lineage import merge_properties as batch_merge_properties
    from wap_ingest.core.models import TableRef

    a, b = SourceObject("s", "t/a.csv", etag="1"), SourceObject("s", "t/b.csv", etag="2")
    assert load_rows(batch_merge_properties(TableRef("wap", "t"), [(a, 3), (b, 5)])) == [3, 5]
    assert load_rows({"wap.rows": "7"}) == [7]
    assert load_rows({"wap.decision.action": "published"}) == []


def test_the_same_version_announced_twice_in_one_delivery_is_written_once(lake: Lake) -> None:
    a = lake.put("customer_data_log/a.csv", rows(3))
    b = lake.put("customer_data_log/b.csv", rows(2, start=10))
    outcomes = _outcomes(lake.run([a, b, a]))
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED, OutcomeStatus.PUBLISHED, OutcomeStatus.DUPLICATE]
    assert len(rows_on(lake.catalog, "main", TABLE)) == 5
