"""Publishing and discarding open WAP branches on the fake catalog: the re-audit, the override, idempotency,
the decision records, and the merged history."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from tests.fakes import FakeCatalog, FakeDecisionLog
from tests.kept_branches import keep_for_review
from wap_ingest.core.branches import identity_digest
from wap_ingest.core.errors import BranchNotFoundError, CatalogError, CatalogUnavailableError
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, DecisionRecord, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Transactions
from wap_ingest.core.review import (
    ReauditFailedError,
    discard_branch,
    history_for,
    open_branches,
    prune_branches,
    publish_branch,
)

TABLE = TableRef("wap", "orders")
FILE = SourceObject("inbox", "orders/bad.parquet", etag="etag1")
IDENTITY = FILE.identity
SOURCE = {"wap.source.bucket": "inbox", "wap.source.key": "orders/bad.parquet", "wap.source.identity": IDENTITY}
BRANCH = f"wap-wap-orders-{identity_digest(IDENTITY)}-0001"  # a name of an earlier version: still a file's branch


def lake() -> FakeCatalog:
    """A rejected file's branch, kept by the transaction (with its run's plan), under the name BRANCH."""
    catalog = FakeCatalog()
    keep_for_review(catalog, [(TABLE, FILE, 20)], name=BRANCH)
    return catalog


def tx(catalog: FakeCatalog) -> Transactions:
    return Transactions(catalog, PipelineConfig(default_namespace="wap", sleep=lambda _s: None))


def source_of(_table: TableRef, _branch: str) -> Mapping[str, str]:
    return SOURCE


def report(passed: bool) -> AuditReport:
    status = CheckStatus.PASSED if passed else CheckStatus.FAILED
    return AuditReport("wap.orders", 20, (CheckResult("not_null", "c", status, "3 nulls", "0 nulls"),))


def reaudit_to(passed: bool, seen: list[tuple[TableRef, str, str]] | None = None):  # type: ignore[no-untyped-def]
    def reaudit(table: TableRef, branch: str, identity: str) -> AuditReport:
        if seen is not None:
            seen.append((table, branch, identity))
        return report(passed)
    return reaudit


def test_a_failing_reaudit_refuses_and_changes_nothing() -> None:
    catalog = lake()
    main = catalog.reference_hash("main")
    with pytest.raises(ReauditFailedError, match=r"still fails the audit.*--no-reaudit --reason") as caught:
        publish_branch(tx(catalog), BRANCH, reason="fine", actor="ann", source_of=source_of, reaudit=reaudit_to(False))
    assert caught.value.report.rows == 20
    assert catalog.reference_hash("main") == main and catalog.find_branch(BRANCH) is not None


def test_a_passing_reaudit_merges_with_source_and_decision_on_the_commit() -> None:
    catalog, seen = lake(), []
    decision = publish_branch(tx(catalog), BRANCH, reason=None, actor="ann", source_of=source_of,
                              reaudit=reaudit_to(True, seen))
    assert seen == [(TABLE, BRANCH, IDENTITY)]
    assert decision.reason == "re-audit passed" and decision.reaudit == report(True)
    assert decision.source == "s3://inbox/orders/bad.parquet"
    props = catalog.commits[catalog.reference_hash("main")].properties
    assert props["wap.decision.reaudit"] == "passed" and props["wap.source.identity"] == IDENTITY
    assert props["wap.decision.actor"] == "ann" and props["wap.rows"] == "20"
    assert catalog.find_branch(BRANCH) is None
    # the ledger's entry came with the merge: a redelivery of the object version is a duplicate
    entry = catalog.find_published("main", TABLE, [IDENTITY])[IDENTITY]
    assert entry.rows == 20 and entry.source == "s3://inbox/orders/bad.parquet"


def test_the_override_needs_a_reason_and_is_recorded() -> None:
    catalog = lake()
    with pytest.raises(CatalogError, match="say why with --reason"):
        publish_branch(tx(catalog), BRANCH, reason=" ", actor="ann", source_of=source_of, reaudit=None)
    publish_branch(tx(catalog), BRANCH, reason="nulls ok", actor="ann", source_of=source_of, reaudit=None)
    props = catalog.commits[catalog.reference_hash("main")].properties
    assert props["wap.decision.reaudit"] == "skipped" and props["wap.decision.reason"] == "nulls ok"


def test_a_publish_retried_after_its_merge_failed_publishes_the_ledger_entry_once() -> None:
    catalog = lake()
    real_merge = catalog.merge
    catalog.merge = lambda *a, **k: (_ for _ in ()).throw(CatalogUnavailableError("nessie down"))  # type: ignore
    with pytest.raises(CatalogUnavailableError):
        publish_branch(tx(catalog), BRANCH, reason="ok", actor="ann", source_of=source_of, reaudit=None)
    catalog.merge = real_merge  # type: ignore[method-assign]
    publish_branch(tx(catalog), BRANCH, reason="ok", actor="ann", source_of=source_of, reaudit=None)
    assert IDENTITY in catalog.find_published("main", TABLE, [IDENTITY])


def test_publishing_twice_or_after_an_interrupted_publish_is_a_no_op() -> None:
    catalog = lake()
    first = publish_branch(tx(catalog), BRANCH, reason="ok", actor="ann", source_of=source_of, reaudit=None)
    again = publish_branch(tx(catalog), BRANCH, reason="again", actor="bob", source_of=source_of, reaudit=None)
    assert again.already and again.merged_hash == first.merged_hash and again.actor == "ann"
    # merged, then interrupted before the branch was deleted: the repeat deletes it and merges nothing
    catalog2 = lake()
    catalog2.merge(catalog2.find_branch(BRANCH), "main", catalog2.reference_hash("main"), "m",  # type: ignore[arg-type]
                   {"wap.table": "wap.orders", **SOURCE})
    main = catalog2.reference_hash("main")
    redo = publish_branch(tx(catalog2), BRANCH, reason="ok", actor="ann", source_of=source_of,
                          reaudit=reaudit_to(False))
    assert redo.already and catalog2.reference_hash("main") == main and catalog2.find_branch(BRANCH) is None


def test_discard_is_recorded_and_publishing_it_afterwards_says_who_discarded_it() -> None:
    catalog, log = lake(), FakeDecisionLog()
    decision = discard_branch(catalog, BRANCH, default_namespace="wap", reason="resent", actor="ann", decisions=log,
                              source_of=source_of)
    assert decision.recorded_at == "memory://1" and catalog.find_branch(BRANCH) is None
    [record] = log.records
    assert (record.branch, record.action, record.actor, record.source) == (
        BRANCH, "discarded", "ann", "s3://inbox/orders/bad.parquet")
    assert discard_branch(catalog, BRANCH, default_namespace="wap", reason="x", actor="bob", decisions=log).already
    with pytest.raises(BranchNotFoundError, match=r"was discarded by ann .*resent.*wap ingest s3://inbox/orders"):
        publish_branch(tx(catalog), BRANCH, reason="ok", actor="bob", source_of=source_of, reaudit=None, decisions=log)


def test_history_merges_publications_and_discards_newest_first() -> None:
    catalog, log = lake(), FakeDecisionLog()
    publish_branch(tx(catalog), BRANCH, reason="ok", actor="ann", source_of=source_of, reaudit=None)
    other = "wap-wap-orders-0123456789abcdef-0002"
    catalog.create_branch(other, catalog.reference_hash("main"))
    discard_branch(catalog, other, default_namespace="wap", reason="bad file", actor="bob", decisions=log)
    entries = history_for(catalog, log, TABLE)
    assert [(e.action, e.how, e.branch) for e in entries] == [("discarded", "by hand", other),
                                                              ("published", "reviewed", BRANCH)]
    assert entries[1].reaudit == "skipped" and entries[1].source == "s3://inbox/orders/bad.parquet"


def test_prune_records_each_discard() -> None:
    catalog, log = lake(), FakeDecisionLog()
    catalog.times[catalog.reference_hash(BRANCH)] = datetime.now(UTC) - timedelta(days=30)
    stale = open_branches(catalog, default_namespace="wap", now=datetime.now(UTC), older_than=timedelta(days=14))
    pruned = prune_branches(catalog, stale, dry_run=False, decisions=log, reason="pruned: older than 14d",
                            actor="ops")
    assert [b.name for b in pruned.discarded] == [BRANCH] and pruned.unrecorded == ()
    assert [(r.branch, r.reason, r.actor) for r in log.records] == [(BRANCH, "pruned: older than 14d", "ops")]
    assert history_for(catalog, log, TABLE)[0].how == "pruned"


def test_history_calls_files_removed_by_the_sweep_swept() -> None:
    catalog, log = lake(), FakeDecisionLog()
    log.record(DecisionRecord(TABLE.qualified, "", "swept", "removed 2 file(s), 4096 bytes", "wap maintain",
                              datetime.now(UTC).isoformat()))
    [entry] = [e for e in history_for(catalog, log, TABLE) if e.action == "swept"]
    assert entry.how == "swept" and entry.actor == "wap maintain"
