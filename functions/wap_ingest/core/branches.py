"""The branches WAP runs make: one naming scheme for every kind of run, and the clean-up that leaves none behind.

Every run's branch is `wap-<table>-<digest>-<kind><started>x<token>` for a table of the service's default namespace
(WAP_NAMESPACE), `wap-<namespace>.<table>-...` for any other (the table is named once, the namespace only when it
says something):
- `<digest>`: 16 hex digits of what the run is about: one object version (a lone file, a dry run), the sorted
  versions of a group, a load's manifest version, or the table itself for maintenance. Every attempt at one thing
  shares it, so a retry finds the earlier attempts and review finds the file.
- `<kind>`: `f` a lone file (kept open when its audit fails), `l` a multi-table load (kept open likewise), `b` a group
  of files, `m` a table's maintenance, `d` a dry run (`wap audit`); the last three are never kept.
- `<started>`: the run's start (unix microseconds: sequential attempts never share one): a branch of a kind that is
  never kept, older than the longest possible run, belongs to a run that died and is deleted by the table's next
  run; among attempts at one thing, the older ones give way to the newer.
- `<token>`: random hex, so two concurrent attempts never share a branch.
Only letters, digits, `_`, `.` and `-` (Nessie's REST paths and pynessie do not escape `/`); identifiers never contain
`-` or `.`, so the parts read back unambiguously. Branches named by earlier versions (`wap-<ns>-<table>-<digest>-...`,
with a random hex, a group's `b<time>t<n>`, a load's `l<n>x<hex>`, or maintenance's `maintain-<hex>`) are still
recognised by review, `wap branches` and `wap prune` (the clean-up after each run lists the current names only: a
branch an earlier version left is pruned by age).
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .errors import WapError
from .meanwhile import Meanwhile
from .models import Branch, TableRef
from .ports import CatalogBranches

BRANCH_PREFIX = "wap"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,127}")
_RUN = re.compile(r"(?P<kind>[fblmd])(?P<started>\d{1,18})x(?P<token>[0-9a-f]{4,16})")
_LEGACY_GROUP = re.compile(r"b(?P<started>\d+)t\d+")
_LEGACY_LOAD = re.compile(r"l\d+x[0-9a-f]+")


class RunKind(enum.StrEnum):
    FILE = "f"
    LOAD = "l"
    BATCH = "b"
    MAINTAIN = "m"
    DRY_RUN = "d"

    @property
    def kept_when_rejected(self) -> bool:
        """Whether a branch of this kind may stay open for review (the others are never kept)."""
        return self in (RunKind.FILE, RunKind.LOAD)


@dataclass(frozen=True)
class RunBranch:
    """A WAP branch's name, read back."""

    name: str
    namespace: str | None  # None: the service's default namespace (not written in the name)
    table_name: str
    digest: str
    kind: RunKind
    started: float | None  # unix seconds; None: named before start times were part of names (age unknown)
    token: str = ""

    def table_in(self, default_namespace: str) -> TableRef:
        """The table, given the service's default namespace (WAP_NAMESPACE)."""
        return TableRef(self.namespace or default_namespace, self.table_name)

    def older_than(self, other: RunBranch) -> bool:
        """Started before `other` (an unknown start counts as the oldest); ties are broken by the token."""
        return (self.started or 0, self.token) < (other.started or 0, other.token)


def identity_digest(identity: str) -> str:
    """The part of a branch name that stands for what the run is about (an object version's identity...)."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def table_prefix(table: TableRef, default_namespace: str) -> str:
    """What every branch of `table` starts with (no other table's branch starts so)."""
    named = table.name if table.namespace == default_namespace else f"{table.namespace}.{table.name}"
    return f"{BRANCH_PREFIX}-{named}-"


def run_branch_name(kind: RunKind, table: TableRef, about: str, *, started: float, default_namespace: str,
                    token: str | None = None) -> str:
    """The branch of one attempt of a run of `kind` on `table` (its first table, for a load) about `about`."""
    started_us = round(started * 1_000_000)
    return (f"{table_prefix(table, default_namespace)}{identity_digest(about)}-{kind.value}{started_us}x"
            f"{token or secrets.token_hex(4)}")


def parse_branch(name: str) -> RunBranch | None:
    """The WAP branch `name` stands for, or None when it is not one (main, a user's branch...)."""
    parts = name.split("-")
    if parts[0] != BRANCH_PREFIX or len(parts) not in (4, 5):
        return None
    if len(parts) == 4:  # wap-[<namespace>.]<table>-<digest>-<run>
        named, digest, last = parts[1:]
        namespace, dot, table = named.rpartition(".")
        if not (_IDENTIFIER.fullmatch(table) and (not dot or _IDENTIFIER.fullmatch(namespace))):
            return None
        run = _RUN.fullmatch(last)
        if run is None or not re.fullmatch(r"[0-9a-f]{16}", digest):
            return None
        return RunBranch(name, namespace or None, table, digest, RunKind(run["kind"]),
                         int(run["started"]) / 1_000_000, run["token"])
    namespace, table, digest, last = parts[1:]  # named by an earlier version: the namespace always written
    if not (_IDENTIFIER.fullmatch(namespace) and _IDENTIFIER.fullmatch(table)):
        return None
    return _legacy(name, namespace, table, digest, last)


def _legacy(name: str, namespace: str, table: str, digest: str, last: str) -> RunBranch | None:
    ref = (namespace, table)
    if (run := _RUN.fullmatch(last)) is not None:
        return RunBranch(name, *ref, digest, RunKind(run["kind"]), int(run["started"]) / 1_000_000, run["token"])
    if (group := _LEGACY_GROUP.fullmatch(last)) is not None:
        return RunBranch(name, *ref, digest, RunKind.BATCH, int(group["started"]))
    if _LEGACY_LOAD.fullmatch(last):
        return RunBranch(name, *ref, digest, RunKind.LOAD, None)
    if digest == "maintain":
        return RunBranch(name, *ref, digest, RunKind.MAINTAIN, None)
    return RunBranch(name, *ref, digest, RunKind.FILE, None) if re.fullmatch(r"[0-9a-f]+", last) else None


def table_from_branch(name: str, default_namespace: str) -> TableRef | None:
    """The table a WAP branch belongs to (a load's: its first table), or None if `name` is not a WAP branch."""
    parsed = parse_branch(name)
    return None if parsed is None else parsed.table_in(default_namespace)


def digest_from_branch(name: str) -> str | None:
    parsed = parse_branch(name)
    return None if parsed is None else parsed.digest


Listed = Callable[[], "dict[TableRef, list[Branch] | WapError]"]  # the tables' WAP branches, listed beside a merge


class RunBranches:
    """Deleting branches: one attempt's, and what earlier attempts and dead runs left behind. A failure to delete is
    noted in the returned text (for the outcome's message), never raised: it must not change an outcome."""

    def __init__(self, catalog: CatalogBranches, *, clock: Callable[[], float], abandoned_after: float,
                 default_namespace: str) -> None:
        self._catalog, self._clock, self._abandoned_after = catalog, clock, abandoned_after
        self._default_namespace = default_namespace

    def listing(self, tables: Iterable[TableRef]) -> Listed:
        """The tables' WAP branches listed in a thread started now (beside a merge, whose branch and others are the
        same whether it is listed before or after it); `clean_up(..., listed=)` waits for it."""
        def read() -> dict[TableRef, list[Branch] | WapError]:
            found: dict[TableRef, list[Branch] | WapError] = {}
            for table in set(tables):
                try:
                    found[table] = self._catalog.list_branches(table_prefix(table, self._default_namespace))
                except WapError as exc:
                    found[table] = exc
            return found
        return Meanwhile(read, "branch-listing")

    def clean_up(self, tables: Iterable[TableRef], about: Iterable[str], *, mine: str | None = None,
                 kept: bool = False, listed: Listed | None = None) -> str:
        """One listing per table of its WAP branches (`listed`: made beside the merge); deletes:
        - `mine` (this run's branch), unless `kept`;
        - other attempts at what this run was about (`about`: identities, whose digests name their branches) of the
          kinds that can be left open: all of them when this run's result stands (published, or nothing to do), only
          the older ones when this run's branch is `kept` (two concurrent rejections never delete each other's);
        - branches of kinds that are never kept, older than the longest possible run (their run died)."""
        digests = {identity_digest(a) for a in about}
        own = parse_branch(mine) if mine else None
        oldest = self._clock() - self._abandoned_after
        notes, mine_listed = [], False
        beforehand = listed() if listed is not None else {}
        for table in sorted(set(tables), key=lambda t: t.qualified):
            try:
                branches = beforehand.get(table) or self._catalog.list_branches(
                    table_prefix(table, self._default_namespace))
                if isinstance(branches, WapError):
                    raise branches
            except WapError as exc:
                notes.append(f" (left-over branches of {table} could not be listed: {exc})")
                continue
            for found in branches:
                mine_listed = mine_listed or found.name == mine
                run = parse_branch(found.name)
                if run is None or run.table_in(self._default_namespace) != table or (found.name == mine and kept):
                    continue
                if found.name == mine or _stale(run, oldest) or (
                        run.digest in digests and run.kind.kept_when_rejected
                        and (not kept or own is None or run.older_than(own))):
                    notes.append(self.discard(found.name, found))
        if mine and not kept and not mine_listed:  # named otherwise (by an earlier version): deleted by its name
            notes.append(self.discard(mine))
        return "".join(notes)

    def discard(self, name: str, known: Branch | None = None) -> str:
        """Delete a branch (at its current head, or at `known`); say so in the text if that is impossible."""
        try:
            found = known or self._catalog.find_branch(name)
            if found is not None:
                self._catalog.delete_branch(found)
            return ""
        except WapError as exc:
            return f" (branch {name!r} could not be deleted and is left open: {exc})"

    def vanished(self, name: str) -> bool:
        """True if the branch is gone; False if it exists or the catalog cannot say (keep the original error)."""
        try:
            return self._catalog.find_branch(name) is None
        except WapError:
            return False


def _stale(run: RunBranch, oldest: float) -> bool:
    return not run.kind.kept_when_rejected and run.started is not None and run.started < oldest


def group_identity(identities: Sequence[str]) -> str:
    """What a group of object versions is about, as one identity (their sorted identities)."""
    return "\n".join(sorted(identities))
