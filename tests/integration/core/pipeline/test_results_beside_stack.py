"""A registered file's audit results recorded beside its data commit (core/pipeline/beside.py) on the real stack: two
commits to one Nessie branch at once (the data table's, by the writer's BranchTables; the results table's, by the
results' own), then the ledger's; and a record that fails after its commit reached the branch publishes nothing."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.fakes import run_one
from wap_ingest.core.audit_results import ResultRow
from wap_ingest.core.errors import ObjectStoreUnavailableError
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


class Watched:
    """The service's own results port, noting the thread of each record, and failing once after the real record."""

    def __init__(self, real: Any) -> None:
        self.real, self.threads, self.fail_after = real, list[str](), False

    def record(self, branch: str, table: TableRef, rows: Sequence[ResultRow]) -> None:
        self.threads.append(threading.current_thread().name)
        self.real.record(branch, table, rows)
        if self.fail_after:
            self.fail_after = False
            raise ObjectStoreUnavailableError("injected: the results' commit landed, then the call failed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _run(lake: Lake, key: str, rows: int, results: Watched) -> Any:
    ports = replace(lake.service.ports, results=results)
    return run_one(lake.put(key, parquet_bytes(rows)), ports=ports, suites=lake.service.suites,
                   config=lake.service.config)


def test_a_registered_files_results_and_rows_reach_main_from_two_commits_made_at_once(lake: Lake,
                                                                                      table_name: str) -> None:
    results = Watched(lake.service.ports.results)
    first = _run(lake, f"{table_name}/a.parquet", 5, results)  # the table is made on its branch first
    second = _run(lake, f"{table_name}/b.parquet", 7, results)
    assert [first.status, second.status] == [OutcomeStatus.PUBLISHED] * 2, second.message
    assert "registered" in second.message
    assert results.threads[-1] == f"results-wap.{table_name}"  # beside the data's commit
    assert lake.count(f"wap.{table_name}") == 12
    recorded = lake.service.ports.results.rows(TableRef("wap", table_name), "main")
    assert {r.source.rsplit("/", 1)[-1] for r in recorded} == {"a.parquet", "b.parquet"}
    assert second.branch not in lake.wap_branches()


def test_a_record_failing_after_its_commit_landed_publishes_nothing_and_the_next_file_goes_through(
        lake: Lake, table_name: str) -> None:
    results = Watched(lake.service.ports.results)
    assert _run(lake, f"{table_name}/a.parquet", 5, results).status is OutcomeStatus.PUBLISHED
    main_before = lake.main_hash()
    results.fail_after = True
    with pytest.raises(ObjectStoreUnavailableError, match="injected"):
        _run(lake, f"{table_name}/b.parquet", 7, results)
    assert results.threads[-1] == f"results-wap.{table_name}"
    assert lake.main_hash() == main_before
    assert not [b for b in lake.wap_branches() if table_name in b]
    again = _run(lake, f"{table_name}/b.parquet", 7, results)
    assert again.status is OutcomeStatus.PUBLISHED, again.message
    assert lake.count(f"wap.{table_name}") == 12
    recorded = lake.service.ports.results.rows(TableRef("wap", table_name), "main")
    per_file = [[r for r in recorded if r.source.endswith(name)] for name in ("/a.parquet", "/b.parquet")]
    assert per_file[0] and len(per_file[1]) == len(per_file[0])  # b's once: its failed attempt's went with its branch
