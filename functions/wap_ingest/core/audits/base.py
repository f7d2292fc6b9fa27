"""What every check shares: its severity, its result, the context it is evaluated in."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from wap_ingest.core.measurements import MeasurementPlan, Measurements, Sample
from wap_ingest.core.models import CheckResult, CheckStatus

SEVERITIES = ("error", "warn")
NEW_COLUMN_POLICIES = ("reject", "allow")
NEW_ROWS_VIEW = "new_rows"  # the view custom_sql queries read


@dataclass(frozen=True)
class AuditContext:
    """What a check may need beyond the measurements: the clock and the rows of earlier published loads."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    history: tuple[int, ...] = ()  # rows of the last published loads of the table, newest first
    metrics: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # metric name -> its value per
    # published load, newest first (anomaly checks; core.anomaly.Metric.name)


def _status(ok: bool, severity: str) -> CheckStatus:
    if ok:
        return CheckStatus.PASSED
    return CheckStatus.WARNED if severity == "warn" else CheckStatus.FAILED


class Check(ABC):
    kind: str
    severity: str

    @abstractmethod
    def plan(self) -> MeasurementPlan: ...

    @abstractmethod
    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]: ...

    def _result(self, target: str, ok: bool, measured: str, expected: str,
                samples: Sequence[Sample] = ()) -> CheckResult:
        return CheckResult(self.kind, target, _status(ok, self.severity), measured, expected, self.severity,
                           tuple(samples) if not ok else ())

    def _missing(self, target: str, expected: str) -> CheckResult:
        return CheckResult(self.kind, target, _status(False, self.severity), "column missing", expected,
                           self.severity)


def _present(measured: Measurements, column: str) -> str | None:
    """The column's name as the table spells it (names are case-insensitive), or None."""
    return {c.lower(): c for c in measured.columns}.get(column.lower())
