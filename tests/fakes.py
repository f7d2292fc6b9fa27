"""In-memory fakes of the ports, for fast unit tests of the core. They subclass the real ports and
mimic the behaviours the pipeline relies on (Nessie's hash checks and key-level merge conflicts)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.fake_catalog import FakeCatalog, Rows
from tests.fake_jobs import FakeJobs
from tests.fake_measures import aggregate as _aggregate
from tests.fake_measures import profile as _profile
from tests.fake_measures import rows_on
from tests.fake_results import FakeAuditResults
from wap_ingest.core import lineage
from wap_ingest.core.alerts import Alert
from wap_ingest.core.downstream import DownstreamEvent
from wap_ingest.core.errors import (
    CatalogError,
    InfrastructureError,
    SchemaDriftError,
    SchemaMismatchError,
    SourceNotFoundError,
    UnreadableSourceError,
)
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import (
    FAILED_CHECKS_COLUMN,
    SOURCE_COLUMN,
    Appended,
    AppendResult,
    DecisionRecord,
    FileFormat,
    Quarantined,
    QuarantinePlan,
    SourceObject,
    TableRef,
)
from wap_ingest.core.ports import (
    DecisionLog,
    EventSink,
    Notifier,
    ObjectStore,
    ReportStore,
    Retries,
    StagedFiles,
    TableWriter,
    WriteSpec,
)
from wap_ingest.core.review import parse_time
from wap_ingest.core.weights import Weight
from wap_ingest.core.write_paths import REGISTERED, REWRITTEN, WritePath

__all__ = [
    "FakeAuditResults",
    "FakeBatchWriter",
    "FakeCatalog",
    "FakeDecisionLog",
    "FakeEventSink",
    "FakeJobs",
    "FakeNotifier",
    "FakeObjectStore",
    "FakeReportStore",
    "FakeRetries",
    "FakeStaged",
    "FakeWriter",
    "Rows",
    "Unreadable",
    "rows_on",
    "run_one",
]


class Unreadable:
    """Object content that no format can parse."""


class FakeObjectStore(ObjectStore):
    """One version per key (the current one): its ETag is the MD5 of its content unless `put` names one, and it has a
    version id only when `put` names one (a versioned bucket's); an older version named by id does not exist."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Rows | Unreadable | bytes] = {}
        self.markers: dict[tuple[str, str], tuple[str | None, str | None]] = {}  # (etag, version id) when named
        self.inflates: dict[str, int] = {}

    def put(self, bucket: str, key: str, content: Rows | Unreadable | bytes, *, etag: str | None = None,
            version_id: str | None = None) -> SourceObject:
        self.objects[(bucket, key)] = content
        self.markers[(bucket, key)] = (etag, version_id)
        return self.head(bucket, key)

    def head(self, bucket: str, key: str, version_id: str | None = None) -> SourceObject:
        if (bucket, key) not in self.objects:
            raise SourceNotFoundError(f"s3://{bucket}/{key}: no such object")
        etag, current = self.markers.get((bucket, key), (None, None))
        if version_id is not None and version_id != current:
            raise SourceNotFoundError(f"s3://{bucket}/{key}: version {version_id} no longer exists")
        content = self.objects[(bucket, key)]
        body = content if isinstance(content, bytes) else repr(content).encode()
        size = len(content) if isinstance(content, bytes) else 100 + len(repr(content))
        return SourceObject(bucket, key, size=size, etag=(etag or hashlib.md5(body).hexdigest()).strip('"'),
                            version_id=current)  # S3's single-part ETag

    def weigh(self, source: SourceObject, fmt: FileFormat) -> Weight:
        """Its stored size, or what a test said it inflates to (`inflates`: key -> processed bytes)."""
        return Weight(source.size or 0, self.inflates.get(source.key, source.size or 0), "fake")

    def list_objects(self, bucket: str, prefix: str) -> list[SourceObject]:
        return [self.head(b, k) for (b, k) in sorted(self.objects)  # as S3ObjectStore: without folder markers
                if b == bucket and k.startswith(prefix) and not k.endswith("/")]

    def read_bytes(self, source: SourceObject, max_bytes: int) -> bytes:
        content = self.objects.get((source.bucket, source.key))
        if content is None:
            raise SourceNotFoundError(f"{source.uri}: no such object")
        body = content if isinstance(content, bytes) else repr(content).encode()
        if len(body) > max_bytes:
            raise UnreadableSourceError(f"{source.uri}: larger than {max_bytes} bytes, too large for a manifest")
        return body

    def download(self, source: SourceObject, directory: Path) -> Path:  # pragma: no cover - parity only
        raise NotImplementedError


class FakeWriter(TableWriter):
    """Tables are catalog contents: {"columns": [...], "snapshots": [(snapshot_id, rows, properties), ...]}.
    Behaves like SparkIcebergWriter: one file is written, then measured; several are staged and measured first
    (files that cannot join the others are reported in `left_out`), and the core appends the ones it accepts."""

    def __init__(self, catalog: FakeCatalog, objects: FakeObjectStore) -> None:
        self.catalog = catalog
        self.objects = objects
        self.fail_with: Exception | None = None
        self.batches: list[int] = []  # the number of files of each snapshot written
        self.staged: list[FakeStaged] = []  # every staging, to check they were all closed
        # as SparkIcebergWriter's `stage`: (the version, "stop now?") -> a local copy, removed once read (None: none)
        self.stage_with: Callable[[SourceObject, Callable[[], bool]], Path] | None = None
        self.starts = 0  # how often the core asked the engine to start (in the background)
        self.started_for: list[list[tuple[WriteSpec, FileFormat]]] = []  # the files of each ask
        self._ids = itertools.count(1000)

    def start(self, files: Sequence[tuple[WriteSpec, FileFormat]], *, together: bool = False) -> None:
        self.starts += 1
        self.started_for.append(list(files))

    def append(self, spec: WriteSpec, source: SourceObject, fmt: FileFormat) -> Appended:
        """Reads the rows the fake store holds (any format and options: parsing is the real engine's part); a
        quarantine knows `not_null` and keys unique within the file (the real engine: every row-level check). Its
        snapshots hold the rows, so it never drops one (trimming is the real maintainer's)."""
        if self.fail_with is not None:
            raise self.fail_with
        if self.stage_with is not None:  # the invocation's deadline is asked between the download's parts
            self.stage_with(source, spec.out_of_time or (lambda: False)).unlink()
        rows = self._read(source, fmt)
        if not rows:  # a header without rows: nothing committed, the core calls it empty
            return Appended(None, (), {source.identity: Measurements(row_count=0)})
        quarantine = spec.quarantine
        moved, kept = self._quarantine(rows, quarantine, source, spec.branch) if quarantine else (None, rows)
        plan, handed = spec.plan, None
        if spec.before_commit is not None and self.path_of(spec, fmt).how == REGISTERED and not (
                plan.references or plan.reconciliations or plan.existing_keys):  # as the real one: no rows to read
            handed = self._measure(kept, plan, tuple(kept[0]), spec.branch, spec.table)
            spec.before_commit(handed)
        appended = self._write(spec.table, spec.branch, [(source, kept)], spec.allow_new_columns)
        return Appended(appended, (source,), {source.identity: handed if handed is not None else self._measure(
                            kept, spec.plan, appended.columns, spec.branch, spec.table)},
                        quarantined={source.identity: moved} if moved is not None else {},
                        write={source.identity: self.path_of(spec, fmt)})

    @staticmethod
    def path_of(spec: WriteSpec, fmt: FileFormat) -> WritePath:
        """As the real engine says it (without reading a footer: every Parquet file fits here)."""
        if spec.write == "rewrite" or fmt is not FileFormat.PARQUET or spec.quarantine is not None:
            return WritePath(REWRITTEN, f"fake: {spec.write}, {fmt.value}, quarantine {spec.quarantine is not None}")
        return WritePath(REGISTERED, "fake: the file fits the table")

    def stage(self, spec: WriteSpec, files: Sequence[tuple[SourceObject, FileFormat]]) -> FakeStaged:
        if self.fail_with is not None:
            raise self.fail_with
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
        together: dict[SourceObject, Rows] = {}
        for source, rows in readable.items():
            if (tuple(rows[0]) if rows else ()) != common:
                left_out[source.identity] = "its format or columns differ from the rest of the batch"
                continue
            measured[source.identity] = self._measure(rows, spec.plan, common, spec.branch)
            together[source] = rows
        staged = FakeStaged(self, spec, measured, left_out, together)
        self.staged.append(staged)
        return staged

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
        return AppendResult(len(written), snapshot_id, parent, existing is None, columns, added, len(snapshots))

    def _quarantine(self, rows: Rows, plan: QuarantinePlan, source: SourceObject,
                    branch: str) -> tuple[Quarantined | None, Rows]:
        keys = {label: Counter(tuple(r.get(c) for c in cols) for r in rows) for label, cols in plan.unique}
        failed = [[label for label, c in plan.not_null if row.get(c) is None] + [
            label for label, cols in plan.unique if keys[label][tuple(row.get(c) for c in cols)] > 1] for row in rows]
        bad = [row | {FAILED_CHECKS_COLUMN: checks, SOURCE_COLUMN: source.uri}
               for row, checks in zip(rows, failed, strict=True) if checks]
        if not bad or len(bad) == len(rows) or len(bad) > plan.max_fraction * len(rows):
            return None, rows
        self._write(plan.table, branch, [(source, bad)], True)
        by_check = Counter(label for checks in failed for label in checks)
        return (Quarantined(plan.table.qualified, len(bad), dict(by_check), len(rows)),
                [row for row, checks in zip(rows, failed, strict=True) if not checks])

    def _measure(self, rows: Rows, plan: MeasurementPlan, columns: tuple[str, ...], branch: str,
                 table: TableRef | None = None) -> Measurements:
        """`table`: the table the rows were appended to on `branch` (its reconciliations read it as it is now)."""
        nulls = {c: sum(1 for r in rows if r.get(c) is None) for c in plan.null_count_columns if c in columns}
        profile = {c: _profile([r.get(c) for r in rows]) for c in plan.profile_columns if c in columns}
        missing, absent = {}, []
        for ref in plan.references:  # the other table as the branch has it: main's rows and the run's own
            if ref.column not in columns:
                continue
            values = [r[ref.column] for r in rows if r.get(ref.column) is not None]
            if ref.table not in self.catalog.contents(branch):
                absent.append(ref.table)
            keys = {r.get(ref.key) for r in rows_on(self.catalog, branch, ref.table)}
            missing[ref.name] = sum(1 for v in values if v not in keys)
        reconciled: dict[str, tuple[float | None, float | None]] = {}
        for rec in plan.reconciliations:  # both tables as the branch has them, the new rows appended
            assert table is not None, "a reconciliation needs the table the rows went to"
            if rec.table not in self.catalog.contents(branch):
                absent.append(rec.table)
            reconciled[rec.name] = (_aggregate(rows_on(self.catalog, branch, table.qualified), rec.ours),
                                    None if rec.table in absent else _aggregate(rows_on(self.catalog, branch,
                                                                                        rec.table), rec.theirs))
        return Measurements(row_count=len(rows), null_counts=nulls, columns=columns, profile=profile,
                            missing=missing, absent=tuple(dict.fromkeys(absent)), reconciled=reconciled)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        content = self.catalog.contents(ref).get(table.qualified)
        snapshots = content["snapshots"] if content else []
        for index in range(len(snapshots) - 1, max(-1, len(snapshots) - 1 - lineage.RECENT_APPENDS), -1):
            sid, rows, props = snapshots[index]
            carried = lineage.identities_in_snapshot({**props, "added-records": str(len(rows))})
            if identity in carried:
                parent = snapshots[index - 1][0] if index else None
                return AppendResult(carried[identity], sid, parent, index == 0, tuple(content["columns"]))
        return None

    def measure_appended(self, table: TableRef, branch: str, appended: AppendResult,
                         plan: MeasurementPlan) -> Measurements:
        snapshots = self.catalog.contents(branch)[table.qualified]["snapshots"]
        rows = next(r for sid, r, _ in snapshots if sid == appended.snapshot_id)
        return self._measure(rows, plan, appended.columns, branch)


FakeBatchWriter = FakeWriter  # the one engine port takes one file or many


class FakeStaged(StagedFiles):
    def __init__(self, writer: FakeWriter, spec: WriteSpec, measured: Mapping[str, Measurements],
                 left_out: Mapping[str, str], together: Mapping[SourceObject, Rows]) -> None:
        super().__init__(measured, left_out)
        self.writer, self.spec, self.together, self.closed = writer, spec, together, False

    def append(self, accepted: Sequence[SourceObject]) -> Appended:
        chosen = [(s, rows) for s, rows in self.together.items() if s in accepted]
        if not chosen:
            return Appended(None, (), {})
        measured = {s.identity: self.measured[s.identity] for s, _ in chosen}
        try:
            appended = self.writer._write(self.spec.table, self.spec.branch, chosen, self.spec.allow_new_columns)
        except SchemaMismatchError as exc:
            return Appended(None, (), measured, {s.identity: str(exc) for s, _ in chosen})
        group = WritePath(REWRITTEN, f"fake: read together with {len(self.together) - 1} other file(s)")
        return Appended(appended, tuple(s for s, _ in chosen), measured, write={s.identity: group for s, _ in chosen})

    def close(self) -> None:
        self.closed = True


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


class FakeEventSink(EventSink):
    """Events kept in memory as a bus would deliver them; `down` plays an unreachable bus (raises a WapError)."""

    def __init__(self) -> None:
        self.events: list[DownstreamEvent] = []
        self.down = False

    def publish(self, events: Sequence[DownstreamEvent]) -> None:
        if self.down:
            raise InfrastructureError("the event bus is unreachable")
        self.events.extend(events)


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


def run_one(source: SourceObject, **kwargs: Any) -> Any:
    """`run_wap` for one object, as the entry points see it: its outcome, or its failure raised."""
    from wap_ingest.core.pipeline import run_wap

    (result,) = run_wap([source], **kwargs)
    if isinstance(result, Exception):
        raise result
    return result


class FakeRetries(Retries):
    """The queue's visibility changes in memory: (queue ARN, receipt handle, seconds) per call; `refusing` plays a
    queue that does not take them (the message then waits for its visibility timeout)."""

    def __init__(self) -> None:
        self.delays: list[tuple[str, str, int]] = []
        self.refusing = False

    def back_off(self, queue_arn: str, receipt_handle: str, seconds: int) -> bool:
        if self.refusing:
            return False
        self.delays.append((queue_arn, receipt_handle, seconds))
        return True
