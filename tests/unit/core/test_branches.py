"""One branch-naming scheme for every kind of run, and the clean-up rules that read it back (core.branches)."""

from __future__ import annotations

from tests.fakes import FakeCatalog
from wap_ingest.adapters.catalog.authz import DRY_RUN_BRANCH
from wap_ingest.core.branches import (
    RunBranches,
    RunKind,
    digest_from_branch,
    identity_digest,
    parse_branch,
    run_branch_name,
    table_from_branch,
)
from wap_ingest.core.models import TableRef

TABLE = TableRef("wap", "customer_data_log")
NOW = 1_800_000_000.0


def named(kind: RunKind, table: TableRef, about: str, *, started: float) -> str:
    """A branch name as the service names it, its default namespace being `wap`."""
    return run_branch_name(kind, table, about, started=started, default_namespace="wap")


def test_every_kind_of_run_names_its_branch_the_same_way_and_reads_back() -> None:
    for kind in RunKind:
        name = named(kind, TABLE, "b/customer_data_log/a.parquet#e1", started=NOW)
        run = parse_branch(name)
        assert run is not None and run.kind is kind and run.table_in("wap") == TABLE and run.started == NOW
        assert run.digest == identity_digest("b/customer_data_log/a.parquet#e1") == digest_from_branch(name)
        assert name.startswith("wap-customer_data_log-") and all(c.isalnum() or c in "_-" for c in name)
        assert table_from_branch(name, "wap") == TABLE  # the default namespace is not written: the table once
    other = named(RunKind.FILE, TableRef("sales", "orders"), "x", started=NOW)
    assert other.startswith("wap-sales.orders-") and table_from_branch(other, "wap") == TableRef("sales", "orders")
    assert table_from_branch(other, "sales") == TableRef("sales", "orders")
    a = named(RunKind.FILE, TABLE, "x", started=NOW)
    assert a != named(RunKind.FILE, TABLE, "x", started=NOW)  # two attempts never share a branch


def test_names_of_earlier_versions_are_still_recognised_and_others_are_not() -> None:
    legacy = parse_branch("wap-wap-t-0123456789abcdef-1a2b3c4d")
    assert legacy is not None and legacy.kind is RunKind.FILE and legacy.table_in("other") == TableRef("wap", "t")
    group = parse_branch("wap-wap-t-0123456789abcdef-b1700000000t2")
    assert group is not None and group.kind is RunKind.BATCH and group.started == 1_700_000_000
    assert parse_branch("wap-wap-t-0123456789abcdef-l1x0a1b2c").kind is RunKind.LOAD  # type: ignore[union-attr]
    assert parse_branch("wap-wap-t-maintain-0a1b2c3d").kind is RunKind.MAINTAIN  # type: ignore[union-attr]
    for other in ("main", "wap-x-y", "wap-wap-t-0123", "dryrun-wap-t-0a1b", "wap-Wap-t-0123456789abcdef-f1x0a1b",
                  "wap-wap-t-0123456789abcdef-zz", "wap-t-0123-f1x0a1b", "wap-a.b.c-0123456789abcdef-f1x0a1b",
                  "wap-.t-0123456789abcdef-f1x0a1b"):
        assert parse_branch(other) is None, other


def test_the_catalog_rule_for_dry_runs_matches_exactly_the_dry_run_branches() -> None:
    import re

    dry = named(RunKind.DRY_RUN, TABLE, "x", started=NOW)
    assert re.fullmatch(DRY_RUN_BRANCH, dry)
    assert re.fullmatch(DRY_RUN_BRANCH, named(RunKind.DRY_RUN, TableRef("s", "t"), "x", started=NOW,
                                                        ))
    for kind in (RunKind.FILE, RunKind.LOAD, RunKind.BATCH, RunKind.MAINTAIN):
        assert not re.fullmatch(DRY_RUN_BRANCH, named(kind, TABLE, "x", started=NOW))
    assert not re.fullmatch(DRY_RUN_BRANCH, "main") and not re.fullmatch(DRY_RUN_BRANCH, dry + "-x")


def _branches(catalog: FakeCatalog, names: list[str]) -> None:
    main = catalog.reference_hash("main")
    for name in names:
        catalog.create_branch(name, main)


def test_clean_up_removes_dead_runs_of_kinds_never_kept_and_leaves_kept_ones() -> None:
    catalog = FakeCatalog()
    old, young = NOW - 2000, NOW - 10
    dead = [named(k, TABLE, "x", started=old) for k in (RunKind.BATCH, RunKind.MAINTAIN, RunKind.DRY_RUN)]
    alive = [named(k, TABLE, "x", started=young) for k in (RunKind.BATCH, RunKind.MAINTAIN)]
    kept = [named(k, TABLE, "y", started=old) for k in (RunKind.FILE, RunKind.LOAD)]  # awaiting review
    other_table = named(RunKind.BATCH, TableRef("wap", "other"), "x", started=old)
    _branches(catalog, dead + alive + kept + [other_table])
    branches = RunBranches(catalog, clock=lambda: NOW, abandoned_after=960, default_namespace="wap")
    note = branches.clean_up([TABLE], [])
    assert note == ""
    assert {b.name for b in catalog.list_branches("wap-")} == set(alive + kept + [other_table])


def test_a_result_that_stands_removes_every_other_attempt_at_the_same_thing() -> None:
    catalog = FakeCatalog()
    attempts = [named(RunKind.FILE, TABLE, "v1", started=NOW - d) for d in (300, 200, 100)]
    load = named(RunKind.LOAD, TABLE, "manifest", started=NOW - 50)
    unrelated = named(RunKind.FILE, TABLE, "v2", started=NOW - 400)
    dry = named(RunKind.DRY_RUN, TABLE, "v1", started=NOW - 5)  # an operator's dry run of the same file
    _branches(catalog, [*attempts, load, unrelated, dry])
    branches = RunBranches(catalog, clock=lambda: NOW, abandoned_after=960, default_namespace="wap")
    branches.clean_up([TABLE], ["v1", "manifest"], mine=attempts[1])
    assert {b.name for b in catalog.list_branches("wap-")} == {unrelated, dry}


def test_a_kept_branch_removes_only_the_older_attempts_so_two_rejections_never_delete_each_other() -> None:
    catalog = FakeCatalog()
    first, second = (named(RunKind.FILE, TABLE, "v1", started=NOW - d) for d in (20, 10))
    older = named(RunKind.FILE, TABLE, "v1", started=NOW - 3000)
    _branches(catalog, [older, first, second])
    branches = RunBranches(catalog, clock=lambda: NOW, abandoned_after=960, default_namespace="wap")
    branches.clean_up([TABLE], ["v1"], mine=second, kept=True)  # the newer rejection: the older attempts go
    assert {b.name for b in catalog.list_branches("wap-")} == {second}
    catalog = FakeCatalog()
    _branches(catalog, [first, second])
    branches = RunBranches(catalog, clock=lambda: NOW, abandoned_after=960, default_namespace="wap")
    branches.clean_up([TABLE], ["v1"], mine=first, kept=True)  # the older one finishing last keeps the newer
    assert {b.name for b in catalog.list_branches("wap-")} == {first, second}
