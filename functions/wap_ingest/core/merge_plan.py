"""What a merge into `main` may carry: exactly its run's plan, each key at the content the service committed.

A run's plan names its keys (core.pipeline.transaction makes it from the run's work and verdict):
- its tables, and for a file or a load (which may set rows aside) each one's quarantine table `<table>_quarantine`
  and its audit results table (core.audit_results: `wap_meta.<namespace>__<table>`);
- the namespaces the run created on its branch (main did not have them);
- its ledger entries (core.ledger): the key of every object version the merge publishes, holding that version's
  entry, and the ledger's namespace where the branch lacked it.
Before any merge into main the transaction reads what the branch changed since the main hash it was made from (the
catalog's diff, `Changes`) and checks it against the plan (`violations`): a key outside the plan, a key of another
kind than planned (a "table" that is no Iceberg table, a table replaced by another content), or a ledger key that
does not hold the planned version's entry refuses the merge. A branch kept for review also records, on its plan
commit (the ledger commit that kept it), a fingerprint of every key the run changed as the service left it (content
id, metadata location, snapshot id; `fingerprinted`): at its publish a key whose content is no longer that, or a
change of the service's that is gone, refuses it too. A refusal names each key and the commit that changed it last
(`refusal`). Pure: the catalog's answers come in as the values below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .errors import CatalogError
from .ledger import LEDGER_NAMESPACE, entry_from, ledger_key
from .models import QUARANTINE_SUFFIX, TableRef

Key = tuple[str, ...]  # a catalog key's elements: ("wap", "orders"), ("wap_ledger", "<digest>"), ("wap",)
TABLE = "ICEBERG_TABLE"
NAMESPACE = "NAMESPACE"
PLAN_BASE = "wap.plan.base"  # on a kept branch's plan commit: the main hash the branch was made from
PLAN_KEYS = "wap.plan.keys"  # ... and the keys the run changed, each with its fingerprint (JSON)
LEDGER_ROOT: Key = (LEDGER_NAMESPACE,)


class ForeignChangeError(CatalogError):
    """A branch holds changes its run's plan does not name (or not at the content the service committed): the merge
    into main is refused and nothing is merged."""


class NotPublishableError(CatalogError):
    """A branch that is not one the service kept for review (a dry run's, a maintenance's, one without the
    transaction's recorded plan): `wap publish` and the Slack buttons refuse it."""


@dataclass(frozen=True)
class Content:
    """A key's content in the catalog, as far as the check needs it (the catalog's type, its content id, and for a
    table its metadata file and current snapshot; a namespace's properties: a ledger entry's)."""

    type: str
    id: str | None = None
    metadata_location: str | None = None
    snapshot_id: int | None = None
    properties: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        if self.type == TABLE:
            snapshot = "" if self.snapshot_id is None else f", snapshot {self.snapshot_id}"
            return f"table metadata {self.metadata_location}{snapshot} (content id {self.id})"
        if self.type == NAMESPACE:
            entry = entry_from(dict(self.properties))
            if entry is not None:
                return f"a ledger entry saying {entry.source} ({entry.identity}) was published into {entry.table}"
            return f"a namespace (content id {self.id})"
        return f"a {self.type} (content id {self.id})"


@dataclass(frozen=True)
class Change:
    """One key whose content differs between two commits: its content before (None: absent) and after."""

    key: Key
    before: Content | None
    after: Content | None


@dataclass(frozen=True)
class Changes:
    """What a branch changed since a base hash, read at `head` (the branch's head then: what a merge would take)."""

    head: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class CommitInfo:
    """One commit of a branch's log: its hash, parent, committer (the principal the catalog authenticated; empty
    without authentication), message, properties and the keys its operations changed."""

    hash: str
    parent: str | None
    committer: str
    message: str
    properties: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[Key, ...] = ()

    def describe(self) -> str:
        who = f", by {self.committer}" if self.committer else ""
        return f"commit {self.hash[:12]} ({' '.join(self.message.split())[:80]!r}{who})"


@dataclass(frozen=True)
class Violation:
    """Why a key (or, with no key, the branch) keeps a merge from happening, and the commit responsible if known."""

    key: Key | None
    why: str
    commit: CommitInfo | None = None


@dataclass(frozen=True)
class MergePlan:
    """The keys a run's merge may carry (see the module's note). `fingerprints`: for a branch kept for review, the
    content the service left at each key it changed (then the only table and namespace keys allowed); None for a
    merge checked right after its run."""

    base: str
    tables: frozenset[Key]
    namespaces: frozenset[Key]
    ledger: Mapping[Key, tuple[str, str]]  # ledger key -> (qualified table, identity) its entry must hold
    fingerprints: Mapping[Key, Content] | None = None


def key_of(table: TableRef) -> Key:
    return (table.namespace, table.name)


def name_of(key: Key | None) -> str:
    return "the branch" if key is None else ".".join(key)


def quarantine_of(table: TableRef) -> TableRef:
    return TableRef(table.namespace, f"{table.name}{QUARANTINE_SUFFIX}")


def plan_for(base: str, tables: Iterable[TableRef], namespaces: Iterable[str],
             files: Iterable[tuple[TableRef, str]], *, quarantine: bool,
             quarantined: Iterable[TableRef] | None = None) -> MergePlan:
    """The plan of a run made from main at `base` that writes `tables` (and with `quarantine` the quarantine tables
    of `quarantined`, by default of every one of `tables`), created `namespaces` on its branch, and publishes `files`
    ((table, identity) of each object version)."""
    tables = list(tables)
    aside = tables if quarantined is None else list(quarantined)
    keys = {key_of(t) for t in tables} | ({key_of(quarantine_of(t)) for t in aside} if quarantine else set())
    ledger: dict[Key, tuple[str, str]] = {(LEDGER_NAMESPACE, ledger_key(t.qualified, i)): (t.qualified, i)
                                          for t, i in files}
    return MergePlan(base, frozenset(keys), frozenset((ns,) for ns in namespaces), ledger)


def fingerprinted(plan: MergePlan, changes: Changes) -> MergePlan:
    """The plan of a branch about to be kept for review: each table and namespace key of the plan the run changed,
    at the content read from the branch now (keys outside the plan are left out: its publish refuses them)."""
    prints = {c.key: c.after for c in changes.changes
              if c.after is not None and (c.key in plan.tables or c.key in plan.namespaces)}
    return replace(plan, tables=frozenset(k for k in prints if k in plan.tables),
                   namespaces=frozenset(k for k in prints if k in plan.namespaces), fingerprints=prints)


def outside(plan: MergePlan, changes: Changes) -> list[Key]:
    """The keys a branch changed that its plan does not name."""
    named = plan.tables | plan.namespaces | set(plan.ledger) | {LEDGER_ROOT}
    return [c.key for c in changes.changes if c.key not in named]


def plan_properties(plan: MergePlan) -> dict[str, str]:
    """A fingerprinted plan as its plan commit carries it (the ledger keys follow from the planned merge's files)."""
    prints = plan.fingerprints or {}
    listed = [{"key": list(k), "kind": "table" if k in plan.tables else "namespace", "type": c.type, "id": c.id,
               "metadata": c.metadata_location, "snapshot": c.snapshot_id, "properties": dict(c.properties)}
              for k, c in sorted(prints.items())]
    return {PLAN_BASE: plan.base, PLAN_KEYS: json.dumps(listed, separators=(",", ":"), sort_keys=True)}


def carries_plan(properties: Mapping[str, str]) -> bool:
    return PLAN_BASE in properties and PLAN_KEYS in properties


def plan_from(properties: Mapping[str, str], files: Iterable[tuple[TableRef, str]]) -> MergePlan | None:
    """The plan a plan commit recorded (`files`: the versions its planned merge publishes), or None if it holds
    none or one that cannot be read (then nothing of the branch is trusted)."""
    if not carries_plan(properties):
        return None
    try:
        listed = json.loads(properties[PLAN_KEYS])
        prints = {tuple(str(e) for e in item["key"]): (str(item["kind"]), Content(
            str(item["type"]), item.get("id"), item.get("metadata"), item.get("snapshot"),
            tuple(sorted((str(k), str(v)) for k, v in (item.get("properties") or {}).items()))))
            for item in listed}
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    ledger: dict[Key, tuple[str, str]] = {(LEDGER_NAMESPACE, ledger_key(t.qualified, i)): (t.qualified, i)
                                          for t, i in files}
    return MergePlan(properties[PLAN_BASE], frozenset(k for k, (kind, _) in prints.items() if kind == "table"),
                     frozenset(k for k, (kind, _) in prints.items() if kind == "namespace"), ledger,
                     {k: c for k, (_, c) in prints.items()})


def violations(plan: MergePlan, changes: Changes) -> list[Violation]:
    """Every way what the branch changed departs from the plan (empty: it may be merged)."""
    found = [Violation(c.key, why) for c in changes.changes if (why := _why(plan, c)) is not None]
    changed = {c.key for c in changes.changes}
    for key, content in sorted((plan.fingerprints or {}).items()):
        if key not in changed:
            found.append(Violation(key, f"the service's change is gone (it committed {content.describe()}); the "
                                        f"key holds main's content again"))
    for key, (table, identity) in sorted(plan.ledger.items()):
        if key not in changed:
            found.append(Violation(key, f"the ledger entry of {identity} in {table} is missing"))
    return found


def _why(plan: MergePlan, change: Change) -> str | None:
    key, before, after = change.key, change.before, change.after
    if key in plan.ledger:
        table, identity = plan.ledger[key]
        entry = entry_from(dict(after.properties)) if after is not None and after.type == NAMESPACE else None
        if entry is None or entry.identity != identity or entry.table != table:
            return f"it holds {_held(after)}, not the ledger entry of {identity} in {table}"
        return None
    if key == LEDGER_ROOT:
        return None if after is not None and after.type == NAMESPACE else f"the ledger's namespace is {_held(after)}"
    if key[0] == LEDGER_NAMESPACE:
        return (f"a ledger entry outside the run's plan ({_held(after)}): it would mark a version as published "
                f"that this run did not publish")
    if key in plan.tables:
        if after is None or after.type != TABLE:
            return f"the run's table holds {_held(after)}, not an Iceberg table"
        if before is not None and before.id != after.id:
            return f"the table was replaced by another content ({_held(after)}; main's is content id {before.id})"
    elif key in plan.namespaces:
        if after is None or after.type != NAMESPACE:
            return f"the namespace the run created holds {_held(after)}"
    else:
        return f"not in the run's plan: it holds {_held(after)} (main: {_held(before)})"
    expected = (plan.fingerprints or {}).get(key) if plan.fingerprints is not None else after
    if expected != after:
        return f"it holds {_held(after)}, not what the service committed ({_held(expected)})"
    return None


def _held(content: Content | None) -> str:
    return "nothing (deleted)" if content is None else content.describe()


def last_change(key: Key, commits: Sequence[CommitInfo]) -> CommitInfo | None:
    """The newest of `commits` (newest first) that changed `key`."""
    return next((c for c in commits if key in c.keys), None)


def refusal(branch: str, found: Sequence[Violation], commits: Sequence[CommitInfo] | None, fix: str) -> str:
    """The message of a refused merge: each key (or the branch), why, and the commit that changed it last (from
    `commits`, the branch's log since its base, newest first; None: it could not be read)."""
    lines = []
    for violation in found:
        commit = violation.commit or (last_change(violation.key, commits or ()) if violation.key else None)
        if commit is not None:
            by = f", changed by {commit.describe()}" if violation.key else f": {commit.describe()}"
        elif violation.key is not None and commits is not None:
            by = ", by no commit since the branch was made"
        else:
            by = ""
        lines.append(f"{name_of(violation.key)}: {violation.why}{by}")
    return (f"refusing to merge branch {branch!r} into main: it holds changes that are not its run's own work "
            f"(a merge carries only the keys of its run's plan, at the content the service committed): "
            f"{'; '.join(lines)}. Nothing was merged; main is unchanged. Fix: {fix}")


def kind_refusal(branch: str, kind: str) -> str:
    """Why a branch of a kind never kept for review is not published (`kind`: core.branches' letter)."""
    what = {"d": "a dry run's branch (`wap audit`): a dry run is never merged",
            "m": "a maintenance run's branch: maintenance merges its own work when its checks pass, never by hand",
            "b": "a group's branch: a group is never kept for review (a file of it that fails its audit runs again "
                 "alone, on a branch of its own)"}.get(kind, f"a branch of kind {kind!r}, never kept for review")
    return (f"refusing to publish {branch!r}: it is {what}. Only a branch kept for review (a rejected file's or "
            f"load's, kinds f and l, with the plan its run recorded) can be published. Nothing was merged; main is "
            f"unchanged. Fix: discard it: wap discard {branch} --reason '...'")


AUTOMATIC_FIX = ("none for the run's files: the run starts again on a fresh branch (the message is retried); find "
                 "out who committed to the branch (the commits named) and revoke that access")


def review_fix(branch: str) -> str:
    return (f"discard it: wap discard {branch} --reason '...', then ingest its files again (wap show {branch} names "
            f"them); find out who committed to it (the commits named)")


def no_plan_refusal(branch: str, source: str | None) -> str:
    """Why a branch without a plan recorded by the service is not published (`source`: its file, when known)."""
    again = f"wap ingest {source}" if source else f"wap ingest s3://... (wap show {branch} names its file)"
    return (f"refusing to publish {branch!r}: it carries no plan recorded by the service's transaction (kept by a "
            f"version before plans were recorded, left by a run that did not keep it for review, or made by hand), "
            f"so the service cannot tell its own changes from anyone else's. Nothing was merged; main is unchanged. "
            f"Fix: discard it: wap discard {branch} --reason '...', then ingest its file again: {again}")


def plan_commit(commits: Sequence[CommitInfo]) -> CommitInfo | None:
    """The newest of a branch's commits (newest first) that carries a plan."""
    return next((c for c in commits if carries_plan(c.properties)), None)


def log_problems(plan: MergePlan, commits: Sequence[CommitInfo]) -> list[Violation]:
    """What a kept branch's log since its plan's base (newest first) says against publishing it: commits after the
    plan commit, commits by another principal than the one that made the plan commit (the catalog records who
    committed when it authenticates), a base that is not in its history."""
    planned = plan_commit(commits)
    if planned is None or not commits or commits[-1].parent != plan.base:
        return [Violation(None, f"its history does not reach the main commit {plan.base[:12]} its plan says it was "
                                f"made from")]
    at = list(commits).index(planned)
    found = [Violation(None, f"a commit made after the service's plan commit {planned.hash[:12]}", c)
             for c in commits[:at]]
    service = planned.committer or "the unauthenticated service"
    return found + [Violation(None, f"a commit by {c.committer or 'an unauthenticated client'}, not by {service} "
                                    f"(who made the plan commit)", c) for c in commits[at:]
                    if c.committer != planned.committer]
