"""What a merge into main may carry, on the real stack without authentication (Nessie, Spark, moto; issue 33, item 3):
a rejected file's branch kept for review, with one more commit made by anyone who can reach the catalog (a table
pointed back at its previous metadata file, a planted ledger entry, an extra table), is refused by `wap publish`,
naming the key and the commit; and an automatic run whose branch gets a key its run did not write before its merge
is not merged (its next attempt, on a fresh branch, is). main's hash does not move. On `wap stack up --auth`, as the
operator: tests/integration/core/test_publish_guard_auth.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Lake, parquet_bytes
from tests.integration.entrypoints.test_ops_cli import rejected_branch, wap
from tests.integration.foreign_commits import attack
from wap_ingest.core.errors import CatalogError
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


@pytest.mark.parametrize("what", ["rollback", "ledger", "table"])
def test_a_commit_after_the_plan_of_a_kept_branch_is_refused_naming_the_key_and_commit(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str], what: str) -> None:
    branch = rejected_branch(lake, table_name)  # main holds 5 rows of the table; the branch 20 more
    catalog = lake.service.catalog
    main = catalog.reference_hash("main")
    key, foreign = attack(catalog, branch, what, TableRef("wap", table_name))
    code, _, err = wap(capsys, "publish", branch, "--no-reaudit", "--reason", "looks fine")
    assert code == 1 and f"refusing to merge branch '{branch}'" in err, err
    assert f"{key}: " in err and f"commit {foreign[:12]} ('by hand: {what}')" in err and f"wap discard {branch}" in err
    assert catalog.reference_hash("main") == main and lake.count(f"wap.{table_name}") == 5
    assert catalog.find_branch(branch) is not None


@pytest.mark.parametrize("what", ["ledger", "table"])
def test_a_run_whose_branch_gets_a_foreign_key_before_its_merge_is_not_merged(
        lake: Lake, table_name: str, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """A commit injected on the run's branch just before its ledger commit (as anyone with write access to the
    branch could): the check before the merge refuses it; the file is then published by a clean attempt."""
    table = TableRef("wap", table_name)
    assert lake.service.ingest(lake.put(f"{table_name}/base.parquet", parquet_bytes(5))).status is \
        OutcomeStatus.PUBLISHED
    catalog = lake.service.catalog
    record, injected = catalog.record_published, []

    def inject_then_record(branch: str, *args: Any, **kwargs: Any) -> Any:
        injected.append(attack(catalog, branch, what, table))
        return record(branch, *args, **kwargs)

    monkeypatch.setattr(catalog, "record_published", inject_then_record)
    main = catalog.reference_hash("main")
    source = lake.put(f"{table_name}/next.parquet", parquet_bytes(7))
    with pytest.raises(CatalogError, match="refusing to merge branch") as refused:
        lake.service.ingest(source)
    [(key, foreign)] = injected
    assert f"{key}: " in str(refused.value) and f"commit {foreign[:12]}" in str(refused.value)
    assert catalog.reference_hash("main") == main and lake.count(f"wap.{table_name}") == 5
    assert key not in {".".join(t) for t in [(x.namespace, x.name) for x in catalog.list_tables("main")]}
    monkeypatch.undo()
    assert lake.service.ingest(source).status is OutcomeStatus.PUBLISHED
    assert lake.count(f"wap.{table_name}") == 12
