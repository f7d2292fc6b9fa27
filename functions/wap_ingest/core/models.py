"""Value objects passed between the core and the adapters. Frozen, small, no behaviour beyond naming."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from .measurements import Measurements, RowRule, Sample
from .write_paths import WritePath


class FileFormat(enum.StrEnum):
    """How a source file is read (core.formats maps suffixes to these; gzip/bzip2 come from the suffix too)."""

    PARQUET = "parquet"
    CSV = "csv"
    TSV = "tsv"  # CSV with a tab delimiter
    JSON = "json"  # JSON lines (one object per line), or one document with `format_options: {multiline: true}`
    ORC = "orc"
    AVRO = "avro"


@dataclass(frozen=True)
class SourceObject:
    """One version of one S3 object: the unit of ingestion and of idempotency."""

    bucket: str
    key: str
    size: int | None = None
    etag: str | None = None
    version_id: str | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def identity(self) -> str:
        """A stable string for this object version: bucket, key and the best version marker known."""
        marker = self.version_id or (self.etag or "").strip('"') or "unversioned"
        return f"{self.bucket}/{self.key}#{marker}"


@dataclass(frozen=True)
class TableRef:
    """A validated `<namespace>.<name>` Iceberg table identifier."""

    namespace: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"

    def __str__(self) -> str:
        return self.qualified


@dataclass(frozen=True)
class Branch:
    name: str
    hash: str


@dataclass(frozen=True)
class AppendResult:
    """What the engine did on the branch: a summary, never a DataFrame."""

    rows: int
    snapshot_id: int
    parent_snapshot_id: int | None
    table_created: bool
    columns: tuple[str, ...] = ()
    # the file's columns the table did not have, added on the branch (schema policy `new_columns: allow`)
    added_columns: tuple[str, ...] = ()
    snapshots: int = 0  # how many snapshots the table's current metadata lists after it (0: not counted)




class CheckStatus(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # a check of severity `error` failed: the run is rejected
    WARNED = "warned"  # a check of severity `warn` failed: published, and the alert says so


@dataclass(frozen=True)
class CheckResult:
    check: str
    target: str
    status: CheckStatus
    measured: str
    expected: str
    severity: str = "error"
    samples: tuple[Sample, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status is CheckStatus.PASSED

    def to_dict(self) -> dict[str, object]:
        return {"check": self.check, "target": self.target, "status": self.status.value,
                "measured": self.measured, "expected": self.expected, "severity": self.severity,
                "samples": [dict(s) for s in self.samples]}


@dataclass(frozen=True)
class AuditReport:
    table: str
    rows: int
    checks: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        """No check of severity `error` failed (warnings do not block the publish)."""
        return not self.failures

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status is CheckStatus.FAILED)

    @property
    def warnings(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status is CheckStatus.WARNED)

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "rows": self.rows,
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> AuditReport:
        """The inverse of to_dict (a report persisted for a rejected run)."""
        checks = data.get("checks")
        results = []
        for item in checks if isinstance(checks, list) else []:
            samples = item.get("samples") or []
            results.append(CheckResult(
                check=str(item["check"]), target=str(item["target"]), status=CheckStatus(item["status"]),
                measured=str(item["measured"]), expected=str(item["expected"]),
                severity=str(item.get("severity", "error")),
                samples=tuple({str(k): str(v) for k, v in s.items()} for s in samples),
            ))
        rows = data.get("rows")
        return cls(table=str(data.get("table")), rows=rows if isinstance(rows, int) else 0, checks=tuple(results))


class OutcomeStatus(enum.StrEnum):
    PUBLISHED = "published"  # audited and merged into main
    REJECTED = "rejected"  # audit failed: the branch stays open with the rows
    INVALID = "invalid"  # the input is unusable: nothing was written
    DUPLICATE = "duplicate"  # this object version is already on main: nothing was done
    FAILED = "failed"  # infrastructure failure (reported by entry points; main untouched)
    SUBMITTED = "submitted"  # a large file handed to the distributed engine (EMR Serverless), which runs WAP
    AUDITED = "audited"  # a dry run (`wap audit`): the audit passed; nothing was published
    WAITING = "waiting"  # under _pending/: ingested with the manifest of its multi-table load (core.loads)


@dataclass(frozen=True)
class IngestOutcome:
    """The fate of one source object. An audit failure is an outcome (`REJECTED`), not an exception."""

    source: SourceObject
    status: OutcomeStatus
    table: str | None = None
    branch: str | None = None
    rows: int = 0
    report: AuditReport | None = None
    merged_hash: str | None = None
    message: str = ""
    attempts: int = 1  # 1 + the merge conflicts retried on a fresh branch
    quarantined: Quarantined | None = None  # rows set aside in <table>_quarantine (on_failure: quarantine)
    parts: tuple[IngestOutcome, ...] = ()  # a multi-table load's files, each with its own table, rows and report
    # seconds per pipeline stage (route, branch, append, audit, merge), summed over retries; for metrics
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {
            "object": self.source.uri,
            "status": self.status.value,
            "table": self.table,
            "branch": self.branch,
            "rows": self.rows,
            "merged_hash": self.merged_hash,
            "attempts": self.attempts,
            "message": self.message,
            "report": self.report.to_dict() if self.report else None,
            "quarantined": self.quarantined.to_dict() if self.quarantined else None,
            **({"files": [part.to_dict() for part in self.parts]} if self.parts else {}),
        }


@dataclass(frozen=True)
class JobRun:
    """A large file's run on the distributed engine (an EMR Serverless job run)."""

    job_run_id: str
    application_id: str
    source: SourceObject
    table: str
    state: str  # the engine's state when last looked at (SUBMITTED, RUNNING, SUCCESS, FAILED, ...)
    submitted_at: str
    already_submitted: bool = False  # True: a duplicate event found the run an earlier one started
    outcome: str | None = None  # the pipeline's outcome, once the job has run (published, rejected...)
    branch: str | None = None  # the branch a rejected large file left open

    @property
    def finished(self) -> bool:
        """The job recorded its outcome, or died without one. The job's own record is the truth for a finished
        run: an engine state of SUCCESS without it is not trusted (moto reports SUCCESS at submission)."""
        return self.outcome is not None or self.state in ("FAILED", "CANCELLED")

    def to_dict(self) -> dict[str, object]:
        return {"job_run_id": self.job_run_id, "application_id": self.application_id, "object": self.source.uri,
                "table": self.table, "state": self.state, "submitted_at": self.submitted_at,
                "outcome": self.outcome, "branch": self.branch}


@dataclass(frozen=True)
class Appended:
    """What the engine did with the files of one table on a branch: one snapshot for the files it wrote, each
    file's measurements, and the files it could not take with the others (they run alone)."""

    snapshot: AppendResult | None  # None: nothing was written
    written: tuple[SourceObject, ...]
    measured: Mapping[str, Measurements]  # by source identity, for every file written (a lone empty file: 0 rows)
    left_out: Mapping[str, str] = field(default_factory=dict)  # by source identity: why
    quarantined: Mapping[str, Quarantined] = field(default_factory=dict)  # by source identity (one file alone)
    write: Mapping[str, WritePath] = field(default_factory=dict)  # by source identity: registered or rewritten, why


QUARANTINE_SUFFIX = "_quarantine"
FAILED_CHECKS_COLUMN = "_wap_failed_checks"
SOURCE_COLUMN = "_wap_source"
LOADED_AT_COLUMN = "_wap_loaded_at"


@dataclass(frozen=True)
class QuarantinePlan:
    """A table with `on_failure: quarantine`: the new rows that fail one of these row-level checks go to `table`
    (`<table>_quarantine`, on the same branch, with the names of the checks they failed), the others to the table,
    when at most `max_fraction` of the file's rows fail; otherwise every row is written and audited as usual.
    Each check is (label, condition): `not_null` columns, row rules, keys unique within the file, and queries over
    `new_rows` whose result names rows by the table's columns."""

    table: TableRef
    max_fraction: float
    not_null: tuple[tuple[str, str], ...] = ()  # (label, column)
    rules: tuple[tuple[str, RowRule], ...] = ()
    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (label, key columns)
    queries: tuple[tuple[str, str], ...] = ()  # (label, SQL over new_rows)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in (*self.not_null, *self.rules, *self.unique, *self.queries))


@dataclass(frozen=True)
class Quarantined:
    """What a quarantine moved aside: the rows, how many failed each check (a row may fail several), and where."""

    table: str
    rows: int
    by_check: Mapping[str, int]
    total_rows: int  # the file's rows, quarantined ones included

    def to_dict(self) -> dict[str, object]:
        return {"table": self.table, "rows": self.rows, "by_check": dict(self.by_check),
                "total_rows": self.total_rows}


@dataclass(frozen=True)
class Publication:
    """One merge into main, as recorded on its commit: what was published, when, and on whose decision."""

    hash: str
    committed_at: str
    message: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"hash": self.hash, "committed_at": self.committed_at, "message": self.message,
                "properties": dict(self.properties)}


@dataclass(frozen=True)
class DecisionRecord:
    """An operator's decision on a WAP branch, as kept in the decision log (discards leave no commit on main)."""

    table: str
    branch: str
    action: str  # "published" or "discarded"
    reason: str
    actor: str
    decided_at: str  # ISO 8601, UTC
    source: str | None = None  # s3://bucket/key of the branch's file, when it could be read

    def to_dict(self) -> dict[str, object]:
        return {"table": self.table, "branch": self.branch, "action": self.action, "reason": self.reason,
                "actor": self.actor, "decided_at": self.decided_at, "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DecisionRecord:
        """Raises ValueError naming the missing or mistyped key."""
        values: dict[str, str] = {}
        for key in ("table", "branch", "action", "reason", "actor", "decided_at"):
            value = data.get(key)
            if not isinstance(value, str):
                raise ValueError(f"decision record: key {key!r} must be a string, got {value!r}")
            values[key] = value
        source = data.get("source")
        return cls(**values, source=source if isinstance(source, str) else None)
