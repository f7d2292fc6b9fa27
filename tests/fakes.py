"""In-memory fakes of the ports, for fast unit tests of the core. They subclass the real ports and
mimic the behaviours the pipeline relies on (Nessie's hash checks and key-level merge conflicts)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    EmptySourceError,
    MergeConflictError,
    SchemaMismatchError,
    SourceNotFoundError,
    StaleHashError,
    UnreadableSourceError,
)
from wap_ingest.core.models import (
    AppendResult,
    BatchAppend,
    Branch,
    DecisionRecord,
    FileFormat,
    MeasurementPlan,
    Measurements,
    Publication,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import (
    BatchTableWriter,
    CatalogBranches,
    DecisionLog,
    ObjectStore,
    ReportStore,
    TableWriter,
)

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Commit:
    parent: str | None
    contents: Mapping[str, Any]
    changed: frozenset[str]
    message: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)


class FakeCatalog(CatalogBranches):
    """A tiny Nessie: commits with parents, named branches, expected-hash checks, key-level conflicts."""

    def __init__(self) -> None:
        self._seq = itertools.count()
        root = self._hash()
        self.commits: dict[str, Commit] = {root: Commit(None, {}, frozenset())}
        self.refs: dict[str, str] = {"main": root}
        self.bases: dict[str, str] = {}
        self.calls: list[str] = []
        self.times: dict[str, datetime] = {}  # commit -> when (the root has none, as in Nessie); tests may set it

    def _hash(self) -> str:
        return hashlib.sha256(str(next(self._seq)).encode()).hexdigest()

    # helpers for the fakes and tests
    def contents(self, ref: str) -> Mapping[str, Any]:
        return self.commits[self.refs[ref]].contents

    def commit(
        self, ref: str, changes: Mapping[str, Any], message: str = "", props: Mapping[str, str] | None = None
    ) -> str:
        head = self.refs[ref]
        new = self._hash()
        self.commits[new] = Commit(head, {**self.commits[head].contents, **changes}, frozenset(changes), message,
                                   dict(props or {}))
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

    # the port
    def reference_hash(self, name: str) -> str:
        self.calls.append(f"reference_hash {name}")
        if name not in self.refs:
            raise BranchNotFoundError(f"reference {name!r} not found")
        return self.refs[name]

    def find_branch(self, name: str) -> Branch | None:
        return Branch(name, self.refs[name]) if name in self.refs else None

    def create_branch(self, name: str, from_hash: str) -> Branch:
        self.calls.append(f"create_branch {name}")
        if name in self.refs:
            raise BranchExistsError(f"reference {name!r} already exists")
        if from_hash not in self.commits:
            raise BranchNotFoundError(f"hash {from_hash} not found")
        self.refs[name] = from_hash
        self.bases[name] = from_hash
        return Branch(name, from_hash)

    def ensure_namespace(self, on: str, namespace: str) -> str:
        if namespace in self.contents(on):
            return self.refs[on]
        return self.commit(on, {namespace: {"type": "namespace"}}, f"create namespace {namespace}")

    def merge(self, branch: Branch, onto: str, expected_hash: str, message: str, properties: Mapping[str, str]) -> str:
        self.calls.append(f"merge {branch.name} -> {onto}")
        if self.refs.get(branch.name) != branch.hash:
            raise StaleHashError(f"{branch.name} is not at {branch.hash}")
        base = self.bases.get(branch.name, expected_hash)
        ours = self._changed_since(branch.hash, base) or set()
        theirs = self._changed_since(self.refs[onto], expected_hash)
        if theirs is None or ours & theirs:
            raise MergeConflictError(f"{onto} changed {sorted(ours & (theirs or ours))} since {expected_hash[:8]}")
        changes = {k: self.commits[branch.hash].contents[k] for k in ours}
        return self.commit(onto, changes, message, properties)

    def delete_branch(self, branch: Branch) -> None:
        self.calls.append(f"delete_branch {branch.name}")
        if branch.name not in self.refs:
            raise BranchNotFoundError(f"reference {branch.name!r} not found")
        if self.refs[branch.name] != branch.hash:
            raise StaleHashError(f"{branch.name} moved")
        del self.refs[branch.name]
        self.bases.pop(branch.name, None)

    def head_commit_time(self, name: str) -> datetime | None:
        return self.times.get(self.reference_hash(name))

    def publications(self, table: TableRef, on: str = "main", limit: int = 100) -> list[Publication]:
        found, cursor = [], self.refs[on]
        while cursor is not None and len(found) < limit:
            commit = self.commits[cursor]
            if commit.properties.get("wap.table") == table.qualified:
                when = self.times.get(cursor)
                found.append(Publication(cursor, when.isoformat() if when else "", commit.message,
                                         dict(commit.properties)))
            cursor = commit.parent
        return found

    def list_branches(self, prefix: str = "") -> list[Branch]:
        return sorted((Branch(n, h) for n, h in self.refs.items() if n.startswith(prefix)), key=lambda b: b.name)


class Unreadable:
    """Object content that no format can parse."""


class FakeObjectStore(ObjectStore):
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Rows | Unreadable | bytes] = {}

    def put(self, bucket: str, key: str, content: Rows | Unreadable | bytes) -> SourceObject:
        self.objects[(bucket, key)] = content
        return self.head(bucket, key)

    def head(self, bucket: str, key: str) -> SourceObject:
        if (bucket, key) not in self.objects:
            raise SourceNotFoundError(f"s3://{bucket}/{key}: no such object")
        content = self.objects[(bucket, key)]
        size = len(content) if isinstance(content, bytes) else 100 + len(repr(content))
        return SourceObject(bucket, key, size=size, etag=hashlib.md5(repr(content).encode()).hexdigest())

    def list_objects(self, bucket: str, prefix: str) -> list[SourceObject]:
        return [self.head(b, k) for (b, k) in sorted(self.objects) if b == bucket and k.startswith(prefix)]

    def download(self, source: SourceObject, directory: Path) -> Path:  # pragma: no cover - parity only
        raise NotImplementedError


class FakeWriter(TableWriter):
    """Tables are catalog contents: {"columns": [...], "snapshots": [(snapshot_id, rows), ...]}."""

    def __init__(self, catalog: FakeCatalog, objects: FakeObjectStore) -> None:
        self.catalog = catalog
        self.objects = objects
        self.fail_with: Exception | None = None
        self._ids = itertools.count(1000)

    def append(self, source: SourceObject, fmt: FileFormat, table: TableRef, branch: str,
               properties: Mapping[str, str], *, allow_new_columns: bool = False) -> AppendResult:
        if self.fail_with is not None:
            raise self.fail_with
        content = self.objects.objects[(source.bucket, source.key)]
        if not isinstance(content, list):
            raise UnreadableSourceError(f"{source.uri}: cannot be read as {fmt.value}")
        if not content:
            raise EmptySourceError(f"{source.uri}: no rows")
        columns = tuple(content[0])
        existing = self.catalog.contents(branch).get(table.qualified)
        if existing is not None and tuple(existing["columns"]) != columns:
            raise SchemaMismatchError(f"{source.uri}: columns {columns} do not fit table {table}")
        snapshots = list(existing["snapshots"]) if existing else []
        parent = snapshots[-1][0] if snapshots else None
        snapshot_id = next(self._ids)
        snapshots.append((snapshot_id, list(content), dict(properties)))
        self.catalog.commit(branch, {table.qualified: {"columns": columns, "snapshots": snapshots}},
                            props=properties)
        return AppendResult(len(content), snapshot_id, parent, existing is None, columns)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        content = self.catalog.contents(ref).get(table.qualified)
        snapshots = content["snapshots"] if content else []
        for index, (sid, rows, props) in enumerate(snapshots):
            if identity in _identities(props):
                parent = snapshots[index - 1][0] if index else None
                return AppendResult(len(rows), sid, parent, index == 0, tuple(content["columns"]))
        return None

    def measure_appended(self, table: TableRef, branch: str, appended: AppendResult,
                         plan: MeasurementPlan) -> Measurements:
        snapshots = self.catalog.contents(branch)[table.qualified]["snapshots"]
        rows = next(r for sid, r, _ in snapshots if sid == appended.snapshot_id)
        nulls = {c: sum(1 for r in rows if r.get(c) is None) for c in plan.null_count_columns if c in appended.columns}
        return Measurements(row_count=len(rows), null_counts=nulls, columns=appended.columns)


def rows_on(catalog: FakeCatalog, ref: str, table: str) -> Rows:
    content = catalog.contents(ref).get(table)
    return [row for _, rows, _ in content["snapshots"] for row in rows] if content else []


def _identities(props: Mapping[str, str]) -> set[str]:
    """The source identities a snapshot carries: one alone, or numbered ones for a batch (core.batch)."""
    return {v for k, v in props.items() if k == "wap.source.identity" or k.startswith("wap.source.identity.")}


class FakeBatchWriter(FakeWriter, BatchTableWriter):
    """One snapshot per batch, like SparkBatchWriter; files whose columns differ from the batch's majority, or
    that cannot be read, are reported unreadable."""

    def __init__(self, catalog: FakeCatalog, objects: FakeObjectStore) -> None:
        super().__init__(catalog, objects)
        self.batches: list[int] = []  # the size of each batch written

    def find_appends(self, table: TableRef, ref: str, identities: Sequence[str]) -> dict[str, AppendResult]:
        found = {}
        for identity in identities:
            appended = self.find_append(table, ref, identity)
            if appended is not None:
                content = self.catalog.contents(ref)[table.qualified]
                props = next(p for sid, _, p in content["snapshots"] if sid == appended.snapshot_id)
                numbered = [k for k, v in props.items() if v == identity and k.startswith("wap.source.identity.")]
                rows = int(props[f"wap.source.rows.{numbered[0].rsplit('.', 1)[1]}"]) if numbered else appended.rows
                found[identity] = AppendResult(rows, appended.snapshot_id, appended.parent_snapshot_id,
                                               appended.table_created, appended.columns)
        return found

    def append_batch(
        self, files: Sequence[tuple[SourceObject, FileFormat]], table: TableRef, branch: str, plan: MeasurementPlan,
        accept: Callable[[SourceObject, Measurements], bool],
        properties: Callable[[Sequence[SourceObject]], Mapping[str, str]],
    ) -> BatchAppend:
        if self.fail_with is not None:
            raise self.fail_with
        readable: dict[SourceObject, Rows] = {}
        unreadable: dict[str, str] = {}
        for source, _ in files:
            content = self.objects.objects[(source.bucket, source.key)]
            if isinstance(content, list) and content:
                readable[source] = content
            else:
                unreadable[source.identity] = "unreadable"
        shapes = [tuple(rows[0]) for rows in readable.values()]
        common = max(set(shapes), key=shapes.count) if shapes else ()
        measured: dict[str, Measurements] = {}
        accepted: list[SourceObject] = []
        for source, rows in readable.items():
            if tuple(rows[0]) != common:
                unreadable[source.identity] = "other columns"
                continue
            nulls = {c: sum(1 for r in rows if r.get(c) is None) for c in plan.null_count_columns if c in common}
            measured[source.identity] = Measurements(len(rows), nulls, common)
            if accept(source, measured[source.identity]):
                accepted.append(source)
        if not accepted:
            return BatchAppend(None, (), measured, unreadable)
        existing = self.catalog.contents(branch).get(table.qualified)
        if existing is not None and tuple(existing["columns"]) != common:
            return BatchAppend(None, (), measured, unreadable | {s.identity: "does not fit" for s in accepted})
        snapshots = list(existing["snapshots"]) if existing else []
        parent = snapshots[-1][0] if snapshots else None
        snapshot_id = next(self._ids)
        written = [row for s in accepted for row in readable[s]]
        props = dict(properties(accepted))
        snapshots.append((snapshot_id, written, props))
        self.catalog.commit(branch, {table.qualified: {"columns": common, "snapshots": snapshots}}, props=props)
        self.batches.append(len(accepted))
        appended = AppendResult(len(written), snapshot_id, parent, existing is None, common)
        return BatchAppend(appended, tuple(accepted), measured, unreadable)


class FakeReportStore(ReportStore):
    def __init__(self) -> None:
        self.saved: dict[str, Mapping[str, object]] = {}

    def save(self, branch: str, document: Mapping[str, object]) -> str:
        self.saved[branch] = document
        return f"memory://{branch}.json"

    def load(self, branch: str) -> dict[str, object] | None:
        found = self.saved.get(branch)
        return dict(found) if found is not None else None


class FakeDecisionLog(DecisionLog):
    def __init__(self) -> None:
        self.records: list[DecisionRecord] = []

    def record(self, decision: DecisionRecord) -> str:
        self.records.append(decision)
        return f"memory://{len(self.records)}"

    def decisions(self, table: TableRef, limit: int = 100) -> list[DecisionRecord]:
        mine = [r for r in self.records if r.table == table.qualified]
        return sorted(mine, key=lambda r: r.decided_at, reverse=True)[:limit]
