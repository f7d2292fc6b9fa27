"""FakeCatalog: the CatalogBranches port in memory, with Nessie's hash checks, reference names, key-level merge
conflicts, content ids (a key keeps its id while it exists, a merge carries it to the target), the committer the
server stamps on each commit, diffs and logs (tests/fakes.py holds the other fakes)."""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    MergeConflictError,
    StaleHashError,
)
from wap_ingest.core.ledger import LEDGER_NAMESPACE, LedgerEntry, ledger_key, matching
from wap_ingest.core.merge_plan import NAMESPACE, TABLE, Change, Changes, CommitInfo, Content
from wap_ingest.core.models import Branch, Publication, TableRef
from wap_ingest.core.ports import CatalogBranches

Rows = list[dict[str, Any]]
_REF_NAME = re.compile(r"[A-Za-z](((?![.][.])[A-Za-z0-9./_-])*[A-Za-z0-9_-])?")  # Nessie's reference names


@dataclass(frozen=True)
class Commit:
    parent: str | None
    contents: Mapping[str, Any]
    changed: frozenset[str]
    message: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    ids: Mapping[str, str] = field(default_factory=dict)  # key -> content id
    committer: str = ""


class FakeCatalog(CatalogBranches):
    """A tiny Nessie: commits with parents, named branches, expected-hash checks, key-level conflicts."""

    def __init__(self) -> None:
        self._seq = itertools.count()
        self._commit_lock = threading.Lock()  # a commit is atomic, as Nessie's (the results land beside the data's)
        root = self._hash()
        self.commits: dict[str, Commit] = {root: Commit(None, {}, frozenset())}
        self.refs: dict[str, str] = {"main": root}
        self.bases: dict[str, str] = {}
        self.calls: list[str] = []
        self.times: dict[str, datetime] = {}  # commit -> when (the root has none, as in Nessie); tests may set it
        self.committer = ""  # the principal stamped on the next commits (Nessie's authenticated one); tests set it

    def _hash(self) -> str:
        return hashlib.sha256(str(next(self._seq)).encode()).hexdigest()

    # helpers for the fakes and tests
    def contents(self, ref: str) -> Mapping[str, Any]:
        return self.commits[self.refs[ref]].contents

    def commit(
        self, ref: str, changes: Mapping[str, Any], message: str = "", props: Mapping[str, str] | None = None,
        ids: Mapping[str, str] | None = None,
    ) -> str:
        """A commit of `changes` on `ref` (a value None deletes the key). A key keeps its content id while it exists;
        a new one gets a new id unless `ids` gives it (a merge carries the branch's)."""
        with self._commit_lock:
            return self._commit(ref, changes, message, props, ids)

    def _commit(self, ref: str, changes: Mapping[str, Any], message: str, props: Mapping[str, str] | None,
                ids: Mapping[str, str] | None) -> str:
        head = self.refs[ref]
        parent = self.commits[head]
        contents, known = dict(parent.contents), dict(parent.ids)
        for key, value in changes.items():
            if value is None:
                contents.pop(key, None)
                known.pop(key, None)
                continue
            if key not in parent.contents or (ids and key in ids):
                known[key] = (ids or {}).get(key) or str(uuid.uuid4())
            contents[key] = value
        new = self._hash()
        self.commits[new] = Commit(head, contents, frozenset(changes), message, dict(props or {}), known,
                                   self.committer)
        self.refs[ref] = new
        self.times[new] = datetime.now(UTC)
        return new

    def _changed_since(self, head: str, ancestor: str) -> set[str] | None:
        changed: set[str] = set()
        cursor: str | None = head
        while cursor is not None and cursor != ancestor:
            changed |= self.commits[cursor].changed
            cursor = self.commits[cursor].parent
        return changed if cursor == ancestor else None

    def _head(self, name: str) -> str:
        if name not in self.refs:
            raise BranchNotFoundError(f"reference {name!r} not found")
        return self.refs[name]

    # the port
    def reference_hash(self, name: str) -> str:
        self.calls.append(f"reference_hash {name}")
        return self._head(name)

    def find_branch(self, name: str) -> Branch | None:
        return Branch(name, self.refs[name]) if name in self.refs else None

    def create_branch(self, name: str, from_hash: str) -> Branch:
        self.calls.append(f"create_branch {name}")
        if not _REF_NAME.fullmatch(name):
            raise CatalogError(f"reference name {name!r}: must start with a letter, then letters, digits or ./_-, "
                               f"without '..', not ending in '.' or '/'")
        if name in self.refs:
            raise BranchExistsError(f"reference {name!r} already exists")
        if from_hash not in self.commits:
            raise BranchNotFoundError(f"hash {from_hash} not found")
        self.refs[name] = from_hash
        self.bases[name] = from_hash
        return Branch(name, from_hash)

    def ensure_namespace(self, on: str, namespace: str) -> str:
        if namespace in self.commits[self._head(on)].contents:
            return self.refs[on]
        return self.commit(on, {namespace: {"type": "namespace"}}, f"create namespace {namespace}")

    def has_namespace(self, ref: str, namespace: str) -> bool:
        return _is_namespace(self.commits[self._head(ref)].contents.get(namespace))

    def merge(self, branch: Branch, onto: str, expected_hash: str, message: str, properties: Mapping[str, str]) -> str:
        """As Nessie: merges `branch.hash` (maybe not the head); nothing changed, no commit; an unknown hash 404s."""
        self.calls.append(f"merge {branch.name} -> {onto}")
        self._head(branch.name)
        if branch.hash not in self.commits:
            raise BranchNotFoundError(f"commit {branch.hash} not found on {branch.name!r}")
        theirs = self._changed_since(self._head(onto), expected_hash)
        if theirs is None:
            raise BranchNotFoundError(f"commit {expected_hash} not found on {onto!r}")
        ours = self._changed_since(branch.hash, self.bases.get(branch.name, expected_hash)) or set()
        contents = self.commits[branch.hash].contents
        # as Nessie 0.99: a namespace changed on both sides is no conflict (the merged side's wins)
        if {k for k in ours & theirs if not _is_namespace(contents.get(k))}:
            raise MergeConflictError(f"{onto} changed {sorted(ours & theirs)} since {expected_hash[:8]}")
        if not ours:
            return self.refs[onto]
        merged = self.commits[branch.hash]
        changes = {k: merged.contents.get(k) for k in ours}
        return self.commit(onto, changes, message, properties, ids={k: merged.ids[k] for k in ours if k in merged.ids})

    def delete_branch(self, branch: Branch) -> None:
        self.calls.append(f"delete_branch {branch.name}")
        if branch.name not in self.refs:
            raise BranchNotFoundError(f"reference {branch.name!r} not found")
        if self.refs[branch.name] != branch.hash:
            raise StaleHashError(f"{branch.name} moved")
        del self.refs[branch.name]
        self.bases.pop(branch.name, None)

    def head_commit(self, name: str) -> Publication | None:
        head = self.reference_hash(name)
        commit, when = self.commits[head], self.times.get(head)
        if when is None:  # the root: no commit yet (as Nessie's "no ancestor" hash)
            return None
        return Publication(head, when.isoformat(), commit.message, dict(commit.properties))

    def publications(self, table: TableRef | None, on: str = "main", limit: int = 100) -> list[Publication]:
        found: list[Publication] = []
        cursor: str | None = self._head(on)
        while cursor is not None and len(found) < limit:
            commit = self.commits[cursor]
            named = commit.properties.get("wap.table"), commit.properties.get("wap.tables")
            if (table is None and named != (None, None)) or (table is not None and (
                    named[0] == table.qualified or f",{table.qualified}," in (named[1] or ""))):
                when = self.times.get(cursor)
                found.append(Publication(cursor, when.isoformat() if when else "", commit.message,
                                         dict(commit.properties)))
            cursor = commit.parent
        return found

    def list_tables(self, ref: str) -> list[TableRef]:
        return sorted((TableRef(*k.split(".")) for k, v in self.commits[self._head(ref)].contents.items()
                       if isinstance(v, Mapping) and "snapshots" in v), key=lambda t: t.qualified)

    def record_published(self, branch: str, entries: Sequence[LedgerEntry],
                         properties: Mapping[str, str] | None = None) -> Branch:
        self.calls.append(f"record_published {branch}")
        contents = self.commits[self._head(branch)].contents
        keys = {f"{LEDGER_NAMESPACE}.{e.key}": {"type": "namespace", "properties": e.properties()} for e in entries}
        if set(keys) & set(contents):
            raise CatalogError(f"{branch}: ledger key(s) {sorted(set(keys) & set(contents))} exist already")
        changes = {} if LEDGER_NAMESPACE in contents else {LEDGER_NAMESPACE: {"type": "namespace"}}
        return Branch(branch, self.commit(branch, changes | keys, f"wap: ledger, {len(entries)} source(s)",
                                          properties))

    def find_published(self, ref: str, table: TableRef, identities: Sequence[str]) -> dict[str, LedgerEntry]:
        self.calls.append(f"find_published {ref}")
        contents = self.commits[self._head(ref)].contents
        found = {}
        for identity in identities:
            value = contents.get(f"{LEDGER_NAMESPACE}.{ledger_key(table.qualified, identity)}")
            if isinstance(value, Mapping):
                found[ledger_key(table.qualified, identity)] = value.get("properties", {})
        return matching(table, found, identities)

    def list_branches(self, prefix: str = "") -> list[Branch]:
        return sorted((Branch(n, h) for n, h in self.refs.items() if n.startswith(prefix)), key=lambda b: b.name)

    def changes(self, name: str, base: str) -> Changes:
        self.calls.append(f"changes {name}")
        head = self._head(name)
        if base not in self.commits:
            raise BranchNotFoundError(f"commit {base} not found")
        old, new = self.commits[base], self.commits[head]
        found = [Change(_key(k), _content(k, old.contents.get(k), old.ids.get(k)),
                        _content(k, new.contents.get(k), new.ids.get(k)))
                 for k in sorted(set(old.contents) | set(new.contents))
                 if (old.contents.get(k), old.ids.get(k)) != (new.contents.get(k), new.ids.get(k))]
        return Changes(head, tuple(found))

    def commit_log(self, name: str, *, until: str | None = None, limit: int = 1000) -> list[CommitInfo]:
        found: list[CommitInfo] = []
        cursor: str | None = self._head(name)
        while cursor is not None and cursor != until and len(found) < limit and cursor in self.times:
            commit = self.commits[cursor]  # the root (no time) is Nessie's "no ancestor", not a commit
            found.append(CommitInfo(cursor, commit.parent, commit.committer, commit.message, dict(commit.properties),
                                    tuple(_key(k) for k in sorted(commit.changed))))
            cursor = commit.parent
        return found


def _key(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


def _content(key: str, value: Any, content_id: str | None) -> Content | None:
    """A key's value as Nessie's content: a namespace (with its properties), else an Iceberg table whose metadata
    file stands for its value (a value committed again is the same metadata file)."""
    if value is None:
        return None
    if _is_namespace(value):
        return Content(NAMESPACE, content_id, properties=tuple(sorted(
            (str(k), str(v)) for k, v in (value.get("properties") or {}).items())))
    digest = hashlib.sha256(repr(value).encode()).hexdigest()[:16]
    return Content(TABLE, content_id, f"fake://{key}/metadata/{digest}.metadata.json")


def _is_namespace(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "namespace"
