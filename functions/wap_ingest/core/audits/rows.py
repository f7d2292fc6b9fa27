"""Row-level checks: each new row is held to a rule (not_null, unique, accepted_values, range, regex) or a
custom query over the view `new_rows` names the rows breaking one."""

from __future__ import annotations

from dataclasses import dataclass

from wap_ingest.core.measurements import MeasurementPlan, Measurements, RowRule, sample_key
from wap_ingest.core.models import CheckResult

from .base import AuditContext, Check, _present


@dataclass(frozen=True)
class NotNull(Check):
    columns: tuple[str, ...]
    severity: str = "error"
    kind = "not_null"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(null_count_columns=self.columns)

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        results = []
        for column in self.columns:
            name = _present(measured, column)
            if name is None:
                results.append(self._missing(column, "0 nulls"))
                continue
            nulls = measured.null_counts.get(name, measured.null_counts.get(column, 0))
            results.append(self._result(column, nulls == 0, f"{nulls} nulls", "0 nulls",
                                        measured.samples.get(sample_key(self.kind, column), ())))
        return results


@dataclass(frozen=True)
class Unique(Check):
    columns: tuple[str, ...]
    against_main: bool = True
    severity: str = "error"
    kind = "unique"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(unique_keys=(self.columns,), existing_keys=(self.columns,) if self.against_main else ())

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        target = ",".join(self.columns)
        if any(_present(measured, c) is None for c in self.columns):
            return [self._missing(target, "unique keys")]
        dup = measured.duplicates.get(self.columns, 0)
        results = [self._result(target, dup == 0, f"{dup} rows repeat a key of the new rows",
                                "0 repeated keys in the new rows",
                                measured.samples.get(sample_key(self.kind, target), ()))]
        if self.against_main:
            old = measured.existing.get(self.columns, 0)
            results.append(self._result(f"{target} vs main", old == 0, f"{old} new rows have a key already on main",
                                        "0 keys already on main",
                                        measured.samples.get(sample_key("unique_vs_main", target), ())))
        return results


@dataclass(frozen=True)
class RuleCheck(Check):
    """accepted_values, range and regex: a condition on each non-null value of one column."""

    rule: RowRule
    expectation: str
    severity: str = "error"

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.rule.kind

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(rules=(self.rule,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        if _present(measured, self.rule.column) is None:
            return [self._missing(self.rule.column, self.expectation)]
        bad = measured.violations.get(self.rule.key, 0)
        return [self._result(self.rule.column, bad == 0, f"{bad} rows outside", self.expectation,
                             measured.samples.get(self.rule.key, ()))]


@dataclass(frozen=True)
class CustomSql(Check):
    sql: str
    name: str
    severity: str = "error"
    kind = "custom_sql"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(queries=(self.sql,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        rows = measured.query_rows.get(self.sql, 0)
        return [self._result(self.name, rows == 0, f"{rows} rows returned", "no rows",
                             measured.samples.get(sample_key(self.kind, self.sql), ()))]
