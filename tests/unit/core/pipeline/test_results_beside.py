"""A lone file's audit results recorded beside its data commit (core/pipeline/beside.py), on the fakes: an engine that
measures before it commits (the fake's register path) hands its figures over and the results are recorded in a thread
meanwhile, the ledger's commit still the branch's last; a rewrite records after its commit; and every way it can go
wrong (other figures answered, the record failing, the data commit failing) publishes nothing and leaves no branch."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from tests.fakes import FakeAuditResults, FakeCatalog, FakeObjectStore, FakeReportStore, FakeWriter, run_one
from wap_ingest.core import ledger
from wap_ingest.core.audit_results import ResultRow, results_table
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import EngineError, ObjectStoreUnavailableError
from wap_ingest.core.models import Appended, FileFormat, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.ports import WriteSpec

T = TableRef("wap", "orders")
ROWS = [{"id": i, "email": f"u{i}@x"} for i in range(10)]


class Results(FakeAuditResults):
    """Notes the thread each record ran in, and fails the next record when told to."""

    def __init__(self, catalog: FakeCatalog) -> None:
        super().__init__(catalog)
        self.threads: list[str] = []
        self.failing: Exception | None = None

    def record(self, branch: str, table: TableRef, rows: Sequence[ResultRow]) -> None:
        self.threads.append(threading.current_thread().name)
        if self.failing is not None:
            failing, self.failing = self.failing, None
            raise failing
        super().record(branch, table, rows)


class Writer(FakeWriter):
    """The fake engine, answering other figures than it handed over, or failing its commit after handing them."""

    other_answer = False
    fail_commit: Exception | None = None

    def append(self, spec: WriteSpec, source: SourceObject, fmt: FileFormat) -> Appended:
        if self.fail_commit is not None and spec.before_commit is not None:
            handed = spec.before_commit
            failing = self.fail_commit

            def then_fail(figures: Any) -> None:
                handed(figures)
                raise failing

            spec = replace(spec, before_commit=then_fail)
        found = super().append(spec, source, fmt)
        if self.other_answer:
            return replace(found, measured={k: replace(v) for k, v in found.measured.items()})  # equal, not the same
        return found


class Lake:
    def __init__(self, write: str = "auto") -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.results = Results(self.catalog)
        self.writer = Writer(self.catalog, self.objects)
        self.ports = Ports(catalog=self.catalog, writer=self.writer, objects=self.objects,
                           reports=FakeReportStore(), results=self.results)
        self.suites = suites_from({"tables": {"orders": {"write": write, "checks": [
            {"check": "not_null", "columns": ["email"]}]}}}, default_namespace="wap")
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)

    def load(self, key: str) -> Any:
        return run_one(self.objects.put("inbox", key, ROWS), ports=self.ports, suites=self.suites,
                       config=self.config)

    def nothing_published(self) -> bool:
        """Main holds neither the table nor its results (its one commit: the ledger's namespace, made first)."""
        on_main = set(self.catalog.contents("main"))
        return not on_main & {T.qualified, results_table(T).qualified}

    def wap_branches(self) -> list[str]:
        return [name for name in self.catalog.refs if name.startswith("wap-")]


def test_a_registered_files_results_are_recorded_beside_its_commit_and_the_ledger_commit_is_the_last() -> None:
    lake = Lake()
    outcome = lake.load("orders/a.parquet")
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert lake.results.threads == ["results-wap.orders"]
    assert [r.check for r in lake.results.rows(T, "main")][:1] == ["not_null"]
    merged = lake.catalog.commits[lake.catalog.refs["main"]]
    ledger_commit = lake.catalog.commits[merged.parent] if merged.parent else None
    assert ledger_commit is not None and any(k.startswith(ledger.LEDGER_NAMESPACE) for k in ledger_commit.changed)
    assert {T.qualified, results_table(T).qualified} <= set(lake.catalog.contents("main"))
    assert lake.wap_branches() == []


def test_a_rewritten_file_records_its_results_after_its_commit() -> None:
    lake = Lake(write="rewrite")
    assert lake.load("orders/a.parquet").status is OutcomeStatus.PUBLISHED
    assert lake.results.threads == [threading.current_thread().name]


def test_figures_handed_over_and_not_answered_publish_nothing() -> None:
    lake = Lake()
    lake.writer.other_answer = True
    with pytest.raises(EngineError, match="not those of the rows it committed"):
        lake.load("orders/a.parquet")
    assert lake.nothing_published() and lake.wap_branches() == []


def test_a_failed_record_publishes_nothing_and_the_next_file_goes_through() -> None:
    lake = Lake()
    lake.results.failing = ObjectStoreUnavailableError("s3 down while the results were written")
    with pytest.raises(ObjectStoreUnavailableError, match="s3 down"):
        lake.load("orders/a.parquet")
    assert lake.nothing_published() and lake.wap_branches() == []
    assert lake.load("orders/b.parquet").status is OutcomeStatus.PUBLISHED
    assert {r.source for r in lake.results.rows(T, "main")} == {"s3://inbox/orders/b.parquet"}


def test_a_data_commit_failing_after_the_figures_were_handed_waits_for_the_record_and_leaves_nothing() -> None:
    lake = Lake()
    lake.writer.fail_commit = ObjectStoreUnavailableError("s3 down while the data file was committed")
    with pytest.raises(ObjectStoreUnavailableError, match="data file"):
        lake.load("orders/a.parquet")
    assert lake.results.threads == ["results-wap.orders"]  # it ran, and ended before the branch was deleted
    assert lake.nothing_published() and lake.wap_branches() == []
    lake.writer.fail_commit = None
    assert lake.load("orders/a.parquet").status is OutcomeStatus.PUBLISHED
