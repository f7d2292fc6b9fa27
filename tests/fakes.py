"""In-memory fakes of the ports, for fast unit tests of the core. They subclass the real ports and
mimic the behaviours the pipeline relies on (Nessie's hash checks and key-level merge conflicts)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wap_ingest.core import lineage
from wap_ingest.core.alerts import Alert
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    MergeConflictError,
    SchemaDriftError,
    SchemaMismatchError,
    SourceNotFoundError,
    StaleHashError,
    UnreadableSourceError,
)
from wap_ingest.core.formats import FormatOptions
from wap_ingest.core.models import (
    Appended,
    AppendResult,
    Branch,
    DecisionRecord,
    FileFormat,
    JobRun,
    MeasurementPlan,
    Measurements,
    Publication,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import (
    CatalogBranches,
    DecisionLog,
    LargeFileJobs,
    Notifier,
    ObjectStore,
    ReportStore,
    TableWriter,
)
from wap_ingest.core.review import parse_time

Rows = list[dict[str, Any]]
_REF_NAME = re.compile(r"[A-Za-z](((?![.][.])[A-Za-z0-9./_-])*[A-Za-z0-9_-])?")  # Nessie's reference names


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
        if ours & theirs:
            raise MergeConflictError(f"{onto} changed {sorted(ours & theirs)} since {expected_hash[:8]}")
        if not ours:
            return self.refs[onto]
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
        found: list[Publication] = []
        cursor: str | None = self._head(on)
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
        body = content if isinstance(content, bytes) else repr(content).encode()
        size = len(content) if isinstance(content, bytes) else 100 + len(repr(content))
        return SourceObject(bucket, key, size=size, etag=hashlib.md5(body).hexdigest())  # S3's single-part ETag

    def list_objects(self, bucket: str, prefix: str) -> list[SourceObject]:
        return [self.head(b, k) for (b, k) in sorted(self.objects)  # as S3ObjectStore: without folder markers
                if b == bucket and k.startswith(prefix) and not k.endswith("/")]

    def download(self, source: SourceObject, directory: Path) -> Path:  # pragma: no cover - parity only
        raise NotImplementedError


class FakeWriter(TableWriter):
    """Tables are catalog contents: {"columns": [...], "snapshots": [(snapshot_id, rows, properties), ...]}.
    Behaves like SparkIcebergWriter: one file is written, then measured; several are measured first, the ones
    `keep` refuses are left out, and files that cannot join the others are reported in `left_out`."""

    def __init__(self, catalog: FakeCatalog, objects: FakeObjectStore) -> None:
        self.catalog = catalog
        self.objects = objects
        self.fail_with: Exception | None = None
        self.batches: list[int] = []  # the number of files of each snapshot written
        self._ids = itertools.count(1000)

    def append(
        self, files: Sequence[tuple[SourceObject, FileFormat]], table: TableRef, branch: str, plan: MeasurementPlan,
        *, keep: Callable[[SourceObject, Measurements], bool] | None = None, allow_new_columns: bool = False,
        read_options: FormatOptions = (),
    ) -> Appended:
        """Reads the rows the fake store holds (any format and options: parsing is the real engine's part)."""
        if self.fail_with is not None:
            raise self.fail_with
        if len(files) == 1:
            source, fmt = files[0]
            rows = self._read(source, fmt)
            if not rows:  # a header without rows: nothing committed, the core calls it empty
                return Appended(None, (), {source.identity: Measurements(row_count=0)})
            appended = self._write(table, branch, [(source, rows)], allow_new_columns)
            return Appended(appended, (source,), {source.identity: self._measure(rows, plan, appended.columns)})
        readable: dict[SourceObject, Rows] = {}
        left_out: dict[str, str] = {}
        for source, fmt in files:
            try:
                readable[source] = self._read(source, fmt)
            except UnreadableSourceError as exc:
                left_out[source.identity] = str(exc)
        shapes = [tuple(rows[0]) if rows else () for rows in readable.values()]
        common = max(set(shapes), key=shapes.count) if shapes else ()
        measured: dict[str, Measurements] = {}
        accepted: list[tuple[SourceObject, Rows]] = []
        for source, rows in readable.items():
            if (tuple(rows[0]) if rows else ()) != common:
                left_out[source.identity] = "its format or columns differ from the rest of the batch"
                continue
            measured[source.identity] = self._measure(rows, plan, common)
            if keep is None or keep(source, measured[source.identity]):
                accepted.append((source, rows))
        if not accepted:
            return Appended(None, (), measured, left_out)
        try:
            appended = self._write(table, branch, accepted, allow_new_columns)
        except SchemaMismatchError as exc:
            return Appended(None, (), measured, left_out | {s.identity: str(exc) for s, _ in accepted})
        return Appended(appended, tuple(s for s, _ in accepted), measured, left_out)

    def _read(self, source: SourceObject, fmt: FileFormat) -> Rows:
        content = self.objects.objects[(source.bucket, source.key)]
        if not isinstance(content, list):
            raise UnreadableSourceError(f"{source.uri}: cannot be read as {fmt.value}")
        return content

    def _write(self, table: TableRef, branch: str, files: list[tuple[SourceObject, Rows]],
               allow_new_columns: bool) -> AppendResult:
        columns = tuple(files[0][1][0])
        existing = self.catalog.contents(branch).get(table.qualified)
        added: tuple[str, ...] = ()
        if existing is not None:
            have = tuple(existing["columns"])
            missing = [c for c in have if c not in columns]
            new = tuple(c for c in columns if c not in have)
            if missing or (new and not allow_new_columns):
                difference = tuple([f"missing {c}" for c in missing] + [f"new {c}" for c in new])
                raise SchemaDriftError(f"{files[0][0].uri}: its columns do not fit table {table}: "
                                       f"{'; '.join(difference)}", difference)
            added, columns = new, have + new
        snapshots = list(existing["snapshots"]) if existing else []
        parent = snapshots[-1][0] if snapshots else None
        snapshot_id = next(self._ids)
        written = [row for _, rows in files for row in rows]
        props = lineage.snapshot_properties([(s, len(rows)) for s, rows in files])
        snapshots.append((snapshot_id, written, props))
        self.catalog.commit(branch, {table.qualified: {"columns": columns, "snapshots": snapshots}}, props=props)
        self.batches.append(len(files))
        return AppendResult(len(written), snapshot_id, parent, existing is None, columns, added)

    @staticmethod
    def _measure(rows: Rows, plan: MeasurementPlan, columns: tuple[str, ...]) -> Measurements:
        nulls = {c: sum(1 for r in rows if r.get(c) is None) for c in plan.null_count_columns if c in columns}
        return Measurements(row_count=len(rows), null_counts=nulls, columns=columns)

    def find_appends(self, table: TableRef, ref: str, identities: Sequence[str]) -> dict[str, AppendResult]:
        content = self.catalog.contents(ref).get(table.qualified)
        snapshots = content["snapshots"] if content else []
        found: dict[str, AppendResult] = {}
        for index, (sid, rows, props) in enumerate(snapshots):
            carried = lineage.identities_in_snapshot({**props, "added-records": str(len(rows))})
            for identity in identities:
                if identity in carried and identity not in found:
                    parent = snapshots[index - 1][0] if index else None
                    found[identity] = AppendResult(carried[identity], sid, parent, index == 0,
                                                   tuple(content["columns"]))
        return found

    def measure_appended(self, table: TableRef, branch: str, appended: AppendResult,
                         plan: MeasurementPlan) -> Measurements:
        snapshots = self.catalog.contents(branch)[table.qualified]["snapshots"]
        rows = next(r for sid, r, _ in snapshots if sid == appended.snapshot_id)
        return self._measure(rows, plan, appended.columns)


FakeBatchWriter = FakeWriter  # the one engine port takes one file or many


def rows_on(catalog: FakeCatalog, ref: str, table: str) -> Rows:
    content = catalog.contents(ref).get(table)
    return [row for _, rows, _ in content["snapshots"] for row in rows] if content else []


class FakeReportStore(ReportStore):
    def __init__(self) -> None:
        self.saved: dict[str, Mapping[str, object]] = {}

    def save(self, branch: str, document: Mapping[str, object]) -> str:
        self.saved[branch] = json.loads(json.dumps(document, default=str))  # kept as S3ReportStore keeps it: JSON
        return f"memory://{branch}.json"

    def load(self, branch: str) -> dict[str, object] | None:
        found = self.saved.get(branch)
        return dict(found) if found is not None else None


class FakeDecisionLog(DecisionLog):
    def __init__(self) -> None:
        self.records: list[DecisionRecord] = []

    def record(self, decision: DecisionRecord) -> str:
        when = parse_time(decision.decided_at)  # one record per table, branch and instant (S3DecisionLog's keys)
        if any((r.table, r.branch, parse_time(r.decided_at)) == (decision.table, decision.branch, when)
               for r in self.records):
            raise CatalogError(f"a decision on {decision.branch!r} at {decision.decided_at} is already recorded")
        self.records.append(decision)
        return f"memory://{len(self.records)}"

    def decisions(self, table: TableRef, limit: int = 100) -> list[DecisionRecord]:
        mine = [r for r in self.records if r.table == table.qualified]
        return sorted(mine, key=lambda r: r.decided_at, reverse=True)[:limit]


class FakeNotifier(Notifier):
    """Alerts kept in memory; `down` plays an unreachable Slack: nothing delivered, False, never raised."""

    def __init__(self) -> None:
        self.alerts: list[Alert] = []
        self.down = False

    def notify(self, alert: Alert) -> bool:
        if self.down:
            return False
        self.alerts.append(alert)
        return True


class FakeJobs(LargeFileJobs):
    """EMR Serverless in memory, as EmrServerlessJobs: one run per object version and table, newest first."""

    def __init__(self) -> None:
        self.started: dict[tuple[str, str], JobRun] = {}  # (table, object version) -> its run
        self.refuse: Exception | None = None  # the engine refuses the next submissions with it

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        if (found := self.started.get((table.qualified, source.identity))) is not None:
            return replace(found, already_submitted=True)
        if self.refuse is not None:
            raise self.refuse
        run = JobRun(f"fake-run-{len(self.started) + 1:06d}", "app-fake", SourceObject(source.bucket, source.key),
                     table.qualified, "SUBMITTED", datetime.now(UTC).isoformat(timespec="microseconds"))
        self.started[(table.qualified, source.identity)] = run
        return run

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        mine = [r for r in self.started.values() if table is None or r.table == table.qualified]
        return sorted(mine, key=lambda r: r.submitted_at, reverse=True)


def run_one(source: SourceObject, **kwargs: Any) -> Any:
    """`run_wap` for one object, as the entry points see it: its outcome, or its failure raised."""
    from wap_ingest.core.pipeline import run_wap

    (result,) = run_wap([source], **kwargs)
    if isinstance(result, Exception):
        raise result
    return result
