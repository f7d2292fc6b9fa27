"""Catalog reads made beside the writes they do not depend on (core/pipeline/transaction.py): the clean-up after a
merge lists the table's WAP branches while the merge runs (core/branches.py `listing`) and deletes from that listing;
the ledger on main is looked up while the run's branch is made, and a file found there still ends as it did (its
branch deleted, nothing written)."""

from __future__ import annotations

import threading
from typing import Any

from tests.unit.core.pipeline.test_results_beside import Lake
from wap_ingest.core.models import OutcomeStatus


def test_the_branches_are_listed_beside_the_merge_and_the_clean_up_deletes_from_that_listing() -> None:
    lake = Lake()
    threads: list[str] = []
    real = lake.catalog.list_branches

    def listed(prefix: str) -> Any:
        threads.append(threading.current_thread().name)
        return real(prefix)

    lake.catalog.list_branches = listed  # type: ignore[method-assign]
    left_over = lake.catalog.create_branch("wap-orders-" + "0" * 16 + "-f1x0", lake.catalog.reference_hash("main"))
    outcome = lake.load("orders/a.parquet")
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert threads == ["branch-listing"]
    assert lake.wap_branches() == [left_over.name]  # another file's attempt: kept


def test_the_ledger_is_looked_up_while_the_branch_is_made_and_a_file_on_main_ends_as_before() -> None:
    lake = Lake()
    threads: list[str] = []
    real = lake.catalog.find_published

    def found(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    lake.catalog.find_published = found  # type: ignore[method-assign]
    assert lake.load("orders/a.parquet").status is OutcomeStatus.PUBLISHED
    main = lake.catalog.reference_hash("main")
    again = lake.load("orders/a.parquet")
    assert again.status is OutcomeStatus.DUPLICATE, again.message
    assert set(threads) == {"ledger-lookup"} and len(threads) == 2
    assert lake.catalog.reference_hash("main") == main and lake.wap_branches() == []
