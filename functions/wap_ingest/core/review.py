"""What an operator does with a branch a rejected file left open: publish it after review, or discard it.

Publishing never forces: if `main` changed the same table since the branch was made, the merge is refused
and the operator is told to re-ingest the file (its rows would otherwise be merged over other writers').
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BranchNotFoundError, CatalogError, MergeConflictError
from .models import Branch, TableRef
from .naming import table_from_branch
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
