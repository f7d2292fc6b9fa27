"""What an operator does with a branch a rejected file left open: publish it after review, or discard it.

Publishing never forces: if `main` changed the same table since the branch was made, the merge is refused
and the operator is told to re-ingest the file (its rows would otherwise be merged over other writers').
Pruning discards the branches older than a threshold (age: the time of the branch's head commit).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .errors import BranchNotFoundError, CatalogError, MergeConflictError, StaleHashError
from .models import Branch, TableRef
from .naming import BRANCH_PREFIX, table_from_branch
from .ports import CatalogBranches

DECISION_PREFIX = "wap.decision."


@dataclass(frozen=True)
class Decision:
    branch: str
    table: TableRef
    action: str  # "published" or "discarded"
    reason: str
    actor: str
    merged_hash: str | None = None


def wap_branch(catalog: CatalogBranches, name: str) -> tuple[Branch, TableRef]:
    table = table_from_branch(name)
    if table is None:
        raise CatalogError(f"{name!r} is not a WAP branch (wap-<namespace>-<table>-<digest>); refusing to touch it.")
    branch = catalog.find_branch(name)
    if branch is None:
        raise BranchNotFoundError(
            f"branch {name!r} does not exist (already published or discarded?). List open ones: wap branches"
        )
    return branch, table


def publish_branch(catalog: CatalogBranches, name: str, *, reason: str, actor: str, main: str = "main") -> Decision:
    branch, table = wap_branch(catalog, name)
    if not reason.strip():
        raise CatalogError("a reason is required to publish a branch whose audit failed: --reason '...'")
    main_hash = catalog.reference_hash(main)
    properties = {f"{DECISION_PREFIX}action": "published", f"{DECISION_PREFIX}reason": reason,
                  f"{DECISION_PREFIX}actor": actor, f"{DECISION_PREFIX}branch": name, "wap.table": table.qualified}
    try:
        merged = catalog.merge(branch, main, main_hash, f"wap: publish reviewed branch {name} ({reason})", properties)
    except MergeConflictError as exc:
        raise MergeConflictError(
            f"{exc} The branch's rows cannot be published without overwriting rows published since. Fix: "
            f"discard the branch and ingest the file again (it will be audited against the current main)."
        ) from exc
    catalog.delete_branch(Branch(name, catalog.reference_hash(name)))
    return Decision(name, table, "published", reason, actor, merged)


def discard_branch(catalog: CatalogBranches, name: str, *, reason: str, actor: str) -> Decision:
    branch, table = wap_branch(catalog, name)
    if not reason.strip():
        raise CatalogError("say why the branch is discarded: --reason '...'")
    catalog.delete_branch(branch)
    return Decision(name, table, "discarded", reason, actor)


@dataclass(frozen=True)
class OpenBranch:
    """An open WAP branch, with the time of its head commit (None: no commit, age unknown)."""

    name: str
    hash: str
    table: TableRef
    head_time: datetime | None

    def age(self, now: datetime) -> timedelta | None:
        return None if self.head_time is None else max(timedelta(0), now - self.head_time)


def open_branches(
    catalog: CatalogBranches, *, now: datetime, table: TableRef | None = None, older_than: timedelta | None = None
) -> list[OpenBranch]:
    """The open WAP branches, optionally of one table and older than a threshold, oldest first."""
    found = []
    for branch in catalog.list_branches(f"{BRANCH_PREFIX}-"):
        owner = table_from_branch(branch.name)
        if owner is None or (table is not None and owner != table):
            continue
        try:
            head_time = catalog.head_commit_time(branch.name)
        except BranchNotFoundError:
            continue  # discarded or published since it was listed
        candidate = OpenBranch(branch.name, branch.hash, owner, head_time)
        age = candidate.age(now)
        if older_than is None or (age is not None and age >= older_than):
            found.append(candidate)
    return sorted(found, key=lambda b: (b.head_time is None, b.head_time or now, b.name))


@dataclass(frozen=True)
class Pruned:
    discarded: tuple[OpenBranch, ...]
    skipped: tuple[tuple[OpenBranch, str], ...]  # (branch, why): it moved or vanished since it was listed


def prune_branches(catalog: CatalogBranches, stale: list[OpenBranch], *, dry_run: bool) -> Pruned:
    """Discard each branch at the hash its age was read at: a branch that moved since is left alone."""
    if dry_run:
        return Pruned(tuple(stale), ())
    discarded, skipped = [], []
    for branch in stale:
        try:
            catalog.delete_branch(Branch(branch.name, branch.hash))
            discarded.append(branch)
        except (BranchNotFoundError, StaleHashError) as exc:
            skipped.append((branch, str(exc)))
    return Pruned(tuple(discarded), tuple(skipped))
