"""Value objects passed between the core and the adapters. Frozen, small, no behaviour beyond naming."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class FileFormat(enum.StrEnum):
    PARQUET = "parquet"
    CSV = "csv"


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


@dataclass(frozen=True)
class MeasurementPlan:
    """What the audit needs measured on the new rows. Built by the core, answered by the engine."""

    null_count_columns: tuple[str, ...] = ()

    def merged(self, other: MeasurementPlan) -> MeasurementPlan:
        cols = tuple(dict.fromkeys(self.null_count_columns + other.null_count_columns))
        return MeasurementPlan(null_count_columns=cols)


@dataclass(frozen=True)
class Measurements:
    """The engine's answers for the rows one run appended."""

    row_count: int
    null_counts: Mapping[str, int] = field(default_factory=dict)
    columns: tuple[str, ...] = ()


class CheckStatus(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"


@dataclass(frozen=True)
class CheckResult:
    check: str
    target: str
    status: CheckStatus
    measured: str
    expected: str

    @property
    def passed(self) -> bool:
        return self.status is CheckStatus.PASSED


@dataclass(frozen=True)
class AuditReport:
    table: str
    rows: int
    checks: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "rows": self.rows,
            "passed": self.passed,
            "checks": [
                {
                    "check": c.check,
                    "target": c.target,
                    "status": c.status.value,
                    "measured": c.measured,
                    "expected": c.expected,
                }
                for c in self.checks
            ],
        }


class OutcomeStatus(enum.StrEnum):
    PUBLISHED = "published"  # audited and merged into main
    REJECTED = "rejected"  # audit failed: the branch stays open with the rows
    INVALID = "invalid"  # the input is unusable: nothing was written
    DUPLICATE = "duplicate"  # this object version is already on main: nothing was done
    FAILED = "failed"  # infrastructure failure (reported by entry points; main untouched)


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
        }


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
