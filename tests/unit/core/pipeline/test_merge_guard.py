"""Every automatic merge into main (a file, a group, a load, maintenance) carries exactly its run's plan (issue 33,
item 3), on the fake catalog: a branch that gets a key its run did not write (another table, a planted ledger entry)
or a commit after the service's last one is refused before the merge, naming the key and the commit; main's hash
does not move and the run fails (its message is retried on a fresh branch). What the plan names does merge: a
table's quarantine table, a namespace the run created, the ledger's namespace."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeNotifier, FakeObjectStore, FakeWriter, rows_on, run_one
from tests.unit.core.pipeline.test_maintenance import SMALL, FakeMaintainer, catalog_with_table, suite
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import CatalogError
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.ledger import LEDGER_NAMESPACE, entry_for
from wap_ingest.core.models import OutcomeStatus, TableRef
from wap_ingest.core.pipeline import MaintenancePorts, PipelineConfig, Ports, maintain_table

SUITES = suites_from({"tables": {
    "orders": [{"check": "not_null", "columns": ["id"]}],
    "lines": {"checks": [{"check": "not_null", "columns": ["id"]}],
              "on_failure": "quarantine", "max_quarantined_fraction": 0.5},
}}, default_namespace="wap")
CONFIG = PipelineConfig(default_namespace="wap", merge_attempts=1, sleep=lambda _s: None)
PLANTED = entry_for(TableRef("wap", "orders"), "source/orders/future.parquet#e9", "s3://source/orders/future.parquet",
                    5, "wap-x", 0.0)
FOREIGN = {"table": {"wap.extra": {"columns": ("id",), "snapshots": []}},
           "ledger": {f"{LEDGER_NAMESPACE}.{PLANTED.key}": {"type": "namespace", "properties": PLANTED.properties()}}}


class Lake:
    def __init__(self) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.writer = FakeWriter(self.catalog, self.objects)
        self.ports = Ports(catalog=self.catalog, writer=self.writer, objects=self.objects)
        self.catalog.ensure_namespace("main", LEDGER_NAMESPACE)  # main's first commit (the transaction's own)

    def run(self, key: str, rows: list[dict[str, Any]]) -> Any:
        return run_one(self.objects.put("source", key, rows), ports=self.ports, suites=SUITES, config=CONFIG)

    def inject(self, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any]) -> list[str]:
        """Each append is followed by a commit of `change` on the run's branch by someone else; their hashes."""
        written, injected = self.writer.append, []

        def append(spec: Any, source: Any, fmt: Any) -> Any:
            appended = written(spec, source, fmt)
            self.catalog.committer = "wap-operator"
            injected.append(self.catalog.commit(spec.branch, change, "injected"))
            self.catalog.committer = ""
            return appended

        monkeypatch.setattr(self.writer, "append", append)
        return injected


@pytest.mark.parametrize("what", ["table", "ledger"])
def test_a_file_whose_branch_got_a_foreign_key_is_not_merged(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    lake = Lake()
    lake.run("orders/a.parquet", [{"id": 1}])
    main = lake.catalog.reference_hash("main")
    injected = lake.inject(monkeypatch, FOREIGN[what])
    key = next(iter(FOREIGN[what]))
    with pytest.raises(CatalogError) as refused:
        lake.run("orders/b.parquet", [{"id": 2}])
    assert re.search(rf"refusing to merge branch 'wap-orders-.*{key}: .*changed by commit {injected[0][:12]} "
                     rf"\('injected', by wap-operator\)", str(refused.value)), refused.value
    assert lake.catalog.reference_hash("main") == main and key not in lake.catalog.contents("main")
    assert len(rows_on(lake.catalog, "main", "wap.orders")) == 1
    assert lake.catalog.list_branches("wap-") == []  # the attempt's branch is gone; the message is retried


def test_a_commit_after_the_ledger_commit_stops_the_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merged is only the hash checked, and the check wants the service's ledger commit at the head."""
    lake = Lake()
    record = lake.catalog.record_published

    def record_then_commit(branch: str, entries: Any, properties: Any = None) -> Any:
        head = record(branch, entries, properties)
        lake.catalog.commit(branch, {"wap.orders": {"columns": (), "snapshots": []}}, "emptied")
        return head

    monkeypatch.setattr(lake.catalog, "record_published", record_then_commit)
    main = lake.catalog.reference_hash("main")
    with pytest.raises(CatalogError, match=r"the branch: a commit after the service's last one .*: commit "
                                           r"\w+ \('emptied'\)"):
        lake.run("orders/a.parquet", [{"id": 1}])
    assert lake.catalog.reference_hash("main") == main and "wap.orders" not in lake.catalog.contents("main")


def test_what_the_plan_names_merges_a_new_namespace_a_quarantine_and_the_ledger() -> None:
    lake = Lake()
    outcome = lake.run("lines/a.parquet", [{"id": None}, {"id": 1}, {"id": 2}])
    assert outcome.status is OutcomeStatus.PUBLISHED and outcome.quarantined is not None
    on_main = lake.catalog.contents("main")
    assert {"wap", "wap.lines", "wap.lines_quarantine", LEDGER_NAMESPACE} <= set(on_main)


def test_a_load_whose_branch_got_a_foreign_table_is_not_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    lake = Lake()
    lake.inject(monkeypatch, FOREIGN["table"])
    files = [lake.objects.put("source", "_pending/orders/o.parquet", [{"id": 1}]),
             lake.objects.put("source", "_pending/lines/l.parquet", [{"id": 2}])]
    manifest = lake.objects.put("source", "_loads/l.json", json.dumps(
        {"files": [f.key for f in files]}).encode())
    main = lake.catalog.reference_hash("main")
    results = ingest([Item(manifest)], ports=lake.ports, suites=SUITES, config=CONFIG, notifier=FakeNotifier())
    (result,) = results
    assert isinstance(result, CatalogError) and "wap.extra: not in the run's plan" in str(result), result
    assert lake.catalog.reference_hash("main") == main


def test_a_maintenance_whose_branch_got_a_foreign_key_is_not_merged() -> None:
    catalog = catalog_with_table()

    class Meddled(FakeMaintainer):
        def maintain(self, *args: Any, **kwargs: Any) -> None:
            super().maintain(*args, **kwargs)
            self.catalog.commit(args[1], FOREIGN["ledger"], "planted")

    main = catalog.reference_hash("main")
    ports = MaintenancePorts(catalog, Meddled(catalog, SMALL))
    with pytest.raises(CatalogError, match=rf"{LEDGER_NAMESPACE}\.{PLANTED.key}: a ledger entry outside the run's "
                                           rf"plan .*changed by commit .*'planted'"):
        maintain_table(TableRef("wap", "orders"), ports=ports, suite=suite(), config=CONFIG)
    assert catalog.reference_hash("main") == main


def test_a_maintenance_merges_its_table_only() -> None:
    catalog: FakeCatalog = catalog_with_table()
    report = maintain_table(TableRef("wap", "orders"), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, SMALL)),
                            suite=suite(), config=CONFIG)
    assert report.merged_hash == catalog.reference_hash("main")
    assert catalog.contents("main")["wap.orders"].get("compacted") is True
