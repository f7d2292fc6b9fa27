"""The plan check itself (core.merge_plan), pure: a kept branch's plan as its commit carries it, the kinds of key a
plan allows, the refusal's message; and the transaction merges nothing it did not check."""

from __future__ import annotations

import re
from pathlib import Path

from wap_ingest.core import merge_plan
from wap_ingest.core.ledger import LEDGER_NAMESPACE, entry_for, ledger_key
from wap_ingest.core.merge_plan import TABLE, Change, Changes, CommitInfo, Content, Violation
from wap_ingest.core.models import TableRef

ORDERS = TableRef("wap", "orders")
IDENTITY = "inbox/orders/a.parquet#e1"
ENTRY = entry_for(ORDERS, IDENTITY, "s3://inbox/orders/a.parquet", 3, "wap-b", 0.0)
LEDGER = Content("NAMESPACE", "l1", properties=tuple(sorted(ENTRY.properties().items())))


def table(content_id: str, metadata: str) -> Content:
    return Content(TABLE, content_id, f"s3://lake/wap/orders/metadata/{metadata}.metadata.json", 7)


def plan() -> merge_plan.MergePlan:
    return merge_plan.plan_for("base", [ORDERS], ["sales"], [(ORDERS, IDENTITY)], quarantine=True)


def changes(*found: Change) -> Changes:
    return Changes("head", found)


RUN = (Change(("wap", "orders"), table("t1", "00001"), table("t1", "00002")),
       Change(("sales",), None, Content("NAMESPACE", "n1")),
       Change((LEDGER_NAMESPACE, ENTRY.key), None, LEDGER))


def test_the_runs_own_changes_pass_and_its_plan_round_trips_through_the_commits_properties() -> None:
    assert merge_plan.violations(plan(), changes(*RUN)) == []
    kept = merge_plan.fingerprinted(plan(), changes(*RUN))
    assert kept.tables == {("wap", "orders")} and kept.namespaces == {("sales",)}  # the quarantine: unchanged
    read = merge_plan.plan_from(merge_plan.plan_properties(kept), [(ORDERS, IDENTITY)])
    assert read == kept and merge_plan.violations(read, changes(*RUN)) == []


def test_a_damaged_plan_is_no_plan() -> None:
    properties = merge_plan.plan_properties(merge_plan.fingerprinted(plan(), changes(*RUN)))
    assert merge_plan.plan_from(properties | {merge_plan.PLAN_KEYS: "[{"}, []) is None
    assert merge_plan.plan_from({merge_plan.PLAN_BASE: "b"}, []) is None


def test_what_a_plan_refuses() -> None:
    kept = merge_plan.fingerprinted(plan(), changes(*RUN))
    cases = {
        "rolled back": (kept, Change(("wap", "orders"), table("t1", "00001"), table("t1", "00001"))),
        "replaced": (plan(), Change(("wap", "orders"), table("t1", "00001"), table("t9", "00009"))),
        "deleted": (plan(), Change(("wap", "orders"), table("t1", "00001"), None)),
        "extra table": (plan(), Change(("wap", "extra"), None, table("t2", "00001"))),
        "planted entry": (plan(), Change((LEDGER_NAMESPACE, ledger_key("wap.orders", "x#1")), None, LEDGER)),
        "namespace as table": (plan(), Change(("sales",), None, table("t3", "00001"))),
    }
    said = {name: merge_plan.violations(p, changes(c, *[r for r in RUN if r.key != c.key]))
            for name, (p, c) in cases.items()}
    assert all(len(found) == 1 for found in said.values()), said
    assert "not what the service committed" in said["rolled back"][0].why
    assert "replaced by another content" in said["replaced"][0].why
    assert "not an Iceberg table" in said["deleted"][0].why
    assert "not in the run's plan" in said["extra table"][0].why
    assert "ledger entry outside the run's plan" in said["planted entry"][0].why
    assert "the namespace the run created holds table metadata" in said["namespace as table"][0].why
    gone = merge_plan.violations(kept, changes(*RUN[1:]))
    assert [v.key for v in gone] == [("wap", "orders")] and "is gone" in gone[0].why


def test_a_refusal_names_the_key_and_the_commit_that_changed_it_last() -> None:
    commits = [CommitInfo("c" * 64, "b" * 64, "wap-operator", "roll back", {}, (("wap", "orders"),)),
               CommitInfo("b" * 64, "a" * 64, "", "append", {}, (("wap", "orders"),))]
    text = merge_plan.refusal("wap-orders-x", [Violation(("wap", "orders"), "it holds X"),
                                               Violation(("wap", "other"), "not in the run's plan")], commits,
                              "discard it")
    assert "wap.orders: it holds X, changed by commit cccccccccccc ('roll back', by wap-operator)" in text
    assert "wap.other: not in the run's plan, by no commit since the branch was made" in text
    assert text.endswith("Nothing was merged; main is unchanged. Fix: discard it")


def test_a_kept_branchs_log_refuses_later_commits_other_principals_and_a_foreign_base() -> None:
    kept = merge_plan.fingerprinted(plan(), changes(*RUN))
    planned = CommitInfo("p" * 64, "w" * 64, "wap-service", "ledger", merge_plan.plan_properties(kept))
    written = CommitInfo("w" * 64, "base", "wap-service", "append")
    assert merge_plan.log_problems(kept, [planned, written]) == []
    later = CommitInfo("l" * 64, "p" * 64, "wap-service", "later")
    sneaked = CommitInfo("w" * 64, "base", "wap-operator", "append")
    assert [v.commit for v in merge_plan.log_problems(kept, [later, planned, written])] == [later]
    assert [v.commit for v in merge_plan.log_problems(kept, [planned, sneaked])] == [sneaked]
    assert "does not reach" in merge_plan.log_problems(kept, [planned])[0].why


def test_every_merge_of_the_transaction_is_of_a_checked_hash() -> None:
    """The one owner of merges (tests/unit/project/test_layering.py) merges only what `_checked` returned."""
    source = (Path(merge_plan.__file__).parent / "pipeline" / "transaction.py").read_text(encoding="utf-8")
    merges = re.findall(r"self\.catalog\.merge\((\w+),", source)
    assert merges and set(merges) == {"checked"}
    assert source.count("checked = self._checked(") == len(merges)
