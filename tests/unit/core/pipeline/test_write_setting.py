"""The `write:` setting of a table (auto | register | rewrite) and how the core carries the engine's answer (issue
27): validated with the audits file, handed to the engine in the WriteSpec, and the path each file took recorded on
the merge commit, in the outcome and in `wap history`; a `write: register` table takes its files one by one."""

from __future__ import annotations

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, run_one
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports, run_wap
from wap_ingest.core.review import history_for
from wap_ingest.core.write_paths import REGISTERED, REWRITTEN, WritePath

T = TableRef("wap", "t")
CHECKS = [{"check": "row_count", "min": 1}]


def suites(entry: object) -> object:
    return suites_from({"tables": {"t": entry}}, default_namespace="wap")


@pytest.mark.parametrize("write", ["auto", "register", "rewrite"])
def test_write_takes_auto_register_or_rewrite_default_auto(write: str) -> None:
    assert suites({"checks": CHECKS, "write": write}).suite_for(T).write == write  # type: ignore[attr-defined]
    assert suites(CHECKS).suite_for(T).write == "auto"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("entry", "phrase"), [
    ({"checks": CHECKS, "write": "copy"}, "write must be auto, register or rewrite, got 'copy'"),
    ({"checks": CHECKS, "write": "register", "on_failure": "quarantine"}, "cannot keep a file's good rows apart"),
    ({"checks": CHECKS, "write": "register", "layout": {"sort_by": ["a"]}}, "cannot sort a file's rows"),
])
def test_a_write_setting_that_cannot_work_fails_at_start_up_naming_the_table(entry: object, phrase: str) -> None:
    with pytest.raises(AuditSuiteError, match="table 't'") as caught:
        suites(entry)
    assert phrase in str(caught.value)


def test_write_properties_name_the_one_path_files_share() -> None:
    registered, rewritten = WritePath(REGISTERED, "fits"), WritePath(REWRITTEN, "csv")
    assert lineage.write_properties([registered]) == {lineage.WRITE: "registered", lineage.WRITE_REASON: "fits"}
    assert lineage.write_properties([registered, rewritten]) == {} == lineage.write_properties([None])
    assert lineage.write_path({lineage.WRITE: "rewritten", lineage.WRITE_REASON: "csv"}) == rewritten
    assert lineage.write_path({}) is None


class Lake:
    def __init__(self, entry: object) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.writer = FakeWriter(self.catalog, self.objects)
        self.ports = Ports(catalog=self.catalog, writer=self.writer, objects=self.objects)
        self.suites = suites(entry)
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)

    def put(self, key: str, rows: int = 3) -> SourceObject:
        return self.objects.put("source", key, [{"a": i, "b": f"v{i}"} for i in range(rows)])


@pytest.mark.parametrize(("key", "write", "said"), [
    ("t/a.parquet", "auto", "registered (fake: the file fits the table)"),
    ("t/a.csv", "auto", "rewritten (fake: auto, csv, quarantine False)"),
    ("t/a.parquet", "rewrite", "rewritten (fake: rewrite, parquet, quarantine False)"),
])
def test_the_path_a_file_took_is_on_the_merge_in_the_outcome_and_in_history(key: str, write: str, said: str) -> None:
    lake = Lake({"checks": CHECKS, "write": write})
    outcome = run_one(lake.put(key), ports=lake.ports, suites=lake.suites, config=lake.config)
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.message.endswith(f"; {said}"), outcome.message
    merge = lake.catalog.commits[lake.catalog.refs["main"]]
    assert f"{merge.properties[lineage.WRITE]} ({merge.properties[lineage.WRITE_REASON]})" == said
    [entry] = history_for(lake.catalog, None, T)
    assert entry.write == said and entry.to_dict()["write"] == said


def test_files_read_together_say_so_and_a_register_table_takes_them_one_by_one() -> None:
    auto = Lake({"checks": CHECKS})
    outcomes = run_wap([auto.put("t/a.parquet"), auto.put("t/b.parquet")], ports=auto.ports, suites=auto.suites,
                       config=auto.config)
    assert auto.writer.batches == [2]
    assert all("rewritten (fake: read together with 1 other file(s))" in o.message for o in outcomes)  # type: ignore[union-attr]
    strict = Lake({"checks": CHECKS, "write": "register"})
    outcomes = run_wap([strict.put("t/a.parquet"), strict.put("t/b.parquet")], ports=strict.ports,
                       suites=strict.suites, config=strict.config)
    assert strict.writer.batches == [1, 1]
    assert all("registered (" in o.message for o in outcomes)  # type: ignore[union-attr]


def test_each_file_of_a_load_says_how_it_was_written_in_its_outcome_the_merge_and_history() -> None:
    import json

    from tests.fakes import FakeEventSink, FakeNotifier
    from wap_ingest.core.ingest import Item, ingest

    lake = Lake(CHECKS)
    lake.suites = suites_from({"tables": {"orders": CHECKS, "lines": {"checks": CHECKS, "write": "rewrite"}}},
                              default_namespace="wap")
    lake.objects.put("source", "_pending/orders/o.parquet", [{"id": 1}])
    lake.objects.put("source", "_pending/lines/l.parquet", [{"id": 2}])
    listed = json.dumps({"files": ["_pending/orders/o.parquet", "_pending/lines/l.parquet"]}).encode()
    [outcome] = ingest([Item(lake.objects.put("source", "_loads/m.json", listed))], ports=lake.ports,  # type: ignore[arg-type]
                       suites=lake.suites, config=lake.config, notifier=FakeNotifier(), events=FakeEventSink())
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome  # type: ignore[union-attr]
    orders, lines = outcome.parts  # type: ignore[union-attr]
    assert orders.message == "registered (fake: the file fits the table)"
    assert lines.message == "rewritten (fake: rewrite, parquet, quarantine False)"
    [entry] = history_for(lake.catalog, None, TableRef("wap", "orders"))
    assert entry.write == "registered (fake: the file fits the table)"
    [entry] = history_for(lake.catalog, None, TableRef("wap", "lines"))
    assert entry.write == "rewritten (fake: rewrite, parquet, quarantine False)"
