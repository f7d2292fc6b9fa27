"""A table's suite (its checks, measured together in one plan), the suites of all tables, and the audit."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

from wap_ingest.core.errors import RefusedEventError
from wap_ingest.core.formats import FormatOptions
from wap_ingest.core.layout import NO_LAYOUT, Layout
from wap_ingest.core.maintenance import DEFAULT_MAINTENANCE, MaintenanceSettings
from wap_ingest.core.measurements import MeasurementPlan, Measurements, Sample
from wap_ingest.core.models import QUARANTINE_SUFFIX, AuditReport, CheckResult, QuarantinePlan, TableRef

from .base import AuditContext, Check
from .learned import Anomaly
from .rows import CustomSql, NotNull, RuleCheck, Unique
from .table import RowCount, RowCountVsHistory, Schema


@dataclass(frozen=True)
class AuditSuite:
    checks: tuple[Check, ...]
    samples: bool = True  # False: no sample rows are read, reported, stored or alerted
    mask: tuple[str, ...] = ()  # columns whose sample values are replaced with a hash of the value
    format_options: FormatOptions = ()  # how the table's files are read (core.formats): delimiter, null_value, ...
    on_failure: str = "reject"  # or "quarantine": rows failing a row-level check go to <table>_quarantine
    max_quarantined_fraction: float = 0.05  # above it, the whole file is rejected as with `reject`
    layout: Layout = NO_LAYOUT  # partition spec, sort order, write properties (core.layout)
    maintenance: MaintenanceSettings = DEFAULT_MAINTENANCE  # when `wap maintain` compacts (core.maintenance)
    write: str = "auto"  # how files are taken into the table: auto | register | rewrite (core.ports.WriteSpec.write)

    def plan(self) -> MeasurementPlan:
        plan = MeasurementPlan()
        for check in self.checks:
            plan = plan.merged(check.plan())
        return plan if self.samples else replace(plan, samples=0)

    def quarantine_plan(self, target: TableRef) -> QuarantinePlan | None:
        """With `on_failure: quarantine`: the blocking row-level checks whose failing rows are set aside."""
        if self.on_failure != "quarantine":
            return None
        blocking = [c for c in self.checks if c.severity == "error"]
        return QuarantinePlan(
            table=TableRef(target.namespace, f"{target.name}{QUARANTINE_SUFFIX}"),
            max_fraction=self.max_quarantined_fraction,
            not_null=tuple((f"not_null({col})", col) for c in blocking if isinstance(c, NotNull) for col in c.columns),
            rules=tuple((f"{c.rule.kind}({c.rule.column})", c.rule) for c in blocking if isinstance(c, RuleCheck)),
            unique=tuple((f"unique({','.join(c.columns)})", c.columns) for c in blocking if isinstance(c, Unique)),
            queries=tuple((f"custom_sql({c.name})", c.sql) for c in blocking if isinstance(c, CustomSql)),
        )

    @property
    def history_loads(self) -> int:
        """How many earlier published loads the suite compares with (0: it needs no history)."""
        return max((c.last for c in self.checks if isinstance(c, RowCountVsHistory)), default=0)

    @property
    def history_metrics(self) -> dict[str, int]:
        """The metrics the suite's anomaly checks judge against the published history, each with how many of the
        last loads they need (the largest `last` among the checks of that metric)."""
        wanted: dict[str, int] = {}
        for check in self.checks:
            if isinstance(check, Anomaly):
                wanted[check.metric.name] = max(wanted.get(check.metric.name, 0), check.last)
        return wanted

    @property
    def allow_new_columns(self) -> bool:
        """The schema policy: may a file add columns to the table (on the branch, published by the merge)?"""
        return any(isinstance(c, Schema) and c.new_columns == "allow" for c in self.checks)


DEFAULT_SUITE = AuditSuite((RowCount(min=1),))


@dataclass(frozen=True)
class AuditSuites:
    by_table: Mapping[TableRef, AuditSuite]
    default: AuditSuite = DEFAULT_SUITE
    strict_tables: bool = False  # True: a key for a table the document does not list is refused

    def suite_for(self, table: TableRef) -> AuditSuite:
        return self.by_table.get(table, self.default)

    def check_listed(self, table: TableRef, source_uri: str) -> None:
        """With `strict_tables`, a table the audits file does not list is refused (INVALID): a typo in a prefix must
        not create a table."""
        if self.strict_tables and table not in self.by_table:
            listed = ", ".join(sorted(t.qualified for t in self.by_table)) or "none"
            raise RefusedEventError(
                f"{source_uri}: it routes to table {table}, which the audits file does not list, and strict_tables is "
                f"on (listed: {listed}). Fix: upload under the prefix of a listed table, or add {table.name!r} under "
                f"`tables:` in the audits file."
            )


def audit(
    suite: AuditSuite, table: TableRef, measured: Measurements, context: AuditContext | None = None
) -> AuditReport:
    context = context or AuditContext()
    results: list[CheckResult] = []
    for check in suite.checks:
        results.extend(check.evaluate(measured, context))
    if not suite.samples or suite.mask:
        results = [replace(r, samples=_shown(r.samples, suite)) for r in results]
    return AuditReport(table=table.qualified, rows=measured.row_count, checks=tuple(results))


def _shown(samples: tuple[Sample, ...], suite: AuditSuite) -> tuple[Sample, ...]:
    """Samples as they may leave the service: none, or with the masked columns' values hashed."""
    if not suite.samples:
        return ()
    masked = {c.lower() for c in suite.mask}
    return tuple({k: (masked_value(v) if k.lower() in masked else v) for k, v in row.items()} for row in samples)


def masked_value(value: str) -> str:
    """A value's stand-in in samples: equal values stay comparable, the value itself is not shown. (A hash of a
    low-entropy value such as a birth date can be guessed; use `samples: false` for those.)"""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
