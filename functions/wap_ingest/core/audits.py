"""Audit suites: parsed from the audits file's document, evaluated against the engine's measurements.

The document shape (YAML in `audits.yml`; parsing YAML is the config layer's job):

    tables:
      customer_data_log:            # `<table>` (default namespace) or `<namespace>.<table>`
        - check: not_null
          columns: [my_col_1]
        - check: row_count
          min: 1
    defaults:                       # optional: the suite of tables not listed (default: row_count min 1)
      - check: row_count
        min: 1
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import AuditSuiteError, InvalidTableNameError
from .models import AuditReport, CheckResult, CheckStatus, MeasurementPlan, Measurements, TableRef
from .naming import table_ref_from


class Check(ABC):
    kind: str

    @abstractmethod
    def plan(self) -> MeasurementPlan: ...

    @abstractmethod
    def evaluate(self, measured: Measurements) -> list[CheckResult]: ...


@dataclass(frozen=True)
class NotNull(Check):
    columns: tuple[str, ...]
    kind = "not_null"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(null_count_columns=self.columns)

    def evaluate(self, measured: Measurements) -> list[CheckResult]:
        results = []
        present = {c.lower(): c for c in measured.columns}
        for column in self.columns:
            if column.lower() not in present:
                results.append(
                    CheckResult(self.kind, column, CheckStatus.FAILED, "column missing", "0 nulls")
                )
                continue
            nulls = measured.null_counts.get(present[column.lower()], 0)
            status = CheckStatus.PASSED if nulls == 0 else CheckStatus.FAILED
            results.append(CheckResult(self.kind, column, status, f"{nulls} nulls", "0 nulls"))
        return results


@dataclass(frozen=True)
class RowCount(Check):
    min: int | None = None
    max: int | None = None
    kind = "row_count"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan()

    def evaluate(self, measured: Measurements) -> list[CheckResult]:
        rows = measured.row_count
        ok = (self.min is None or rows >= self.min) and (self.max is None or rows <= self.max)
        bounds = []
        if self.min is not None:
            bounds.append(f">= {self.min}")
        if self.max is not None:
            bounds.append(f"<= {self.max}")
        status = CheckStatus.PASSED if ok else CheckStatus.FAILED
        return [CheckResult(self.kind, "rows", status, f"{rows} rows", " and ".join(bounds))]


@dataclass(frozen=True)
class AuditSuite:
    checks: tuple[Check, ...]

    def plan(self) -> MeasurementPlan:
        plan = MeasurementPlan()
        for check in self.checks:
            plan = plan.merged(check.plan())
        return plan


DEFAULT_SUITE = AuditSuite((RowCount(min=1),))


@dataclass(frozen=True)
class AuditSuites:
    by_table: Mapping[TableRef, AuditSuite]
    default: AuditSuite = DEFAULT_SUITE

    def suite_for(self, table: TableRef) -> AuditSuite:
        return self.by_table.get(table, self.default)


def audit(suite: AuditSuite, table: TableRef, measured: Measurements) -> AuditReport:
    results: list[CheckResult] = []
    for check in suite.checks:
        results.extend(check.evaluate(measured))
    return AuditReport(table=table.qualified, rows=measured.row_count, checks=tuple(results))


# --- parsing -------------------------------------------------------------------------------------

def _where(table: str, index: int, kind: str | None = None) -> str:
    label = f"check #{index + 1}" + (f" ({kind})" if kind else "")
    return f"audits file: table {table!r}, {label}"


def _columns(spec: Mapping[str, Any], where: str) -> tuple[str, ...]:
    cols = spec.get("columns")
    if isinstance(cols, str):
        cols = [cols]
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c for c in cols):
        raise AuditSuiteError(f"{where}: key 'columns' must be a non-empty list of column names.")
    return tuple(cols)


def _optional_int(spec: Mapping[str, Any], key: str, where: str) -> int | None:
    value: object = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AuditSuiteError(f"{where}: key {key!r} must be a non-negative integer, got {value!r}.")
    return value


def _check_from(spec: Any, table: str, index: int) -> Check:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("check"), str):
        raise AuditSuiteError(f"{_where(table, index)}: each check is a mapping with a 'check' key.")
    kind = spec["check"]
    where = _where(table, index, kind)
    allowed: dict[str, set[str]] = {"not_null": {"columns"}, "row_count": {"min", "max"}}
    if kind not in allowed:
        raise AuditSuiteError(
            f"{where}: unknown check {kind!r}; known checks: {', '.join(sorted(allowed))}."
        )
    unknown = set(spec) - allowed[kind] - {"check"}
    if unknown:
        raise AuditSuiteError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed[kind]))}."
        )
    if kind == "not_null":
        return NotNull(_columns(spec, where))
    low, high = _optional_int(spec, "min", where), _optional_int(spec, "max", where)
    if low is None and high is None:
        raise AuditSuiteError(f"{where}: give 'min', 'max' or both.")
    if low is not None and high is not None and low > high:
        raise AuditSuiteError(f"{where}: 'min' ({low}) is greater than 'max' ({high}).")
    return RowCount(min=low, max=high)


def _suite_from(checks: Any, table: str) -> AuditSuite:
    if not isinstance(checks, Sequence) or isinstance(checks, str):
        raise AuditSuiteError(f"audits file: table {table!r}: expected a list of checks.")
    return AuditSuite(tuple(_check_from(spec, table, i) for i, spec in enumerate(checks)))


def suites_from(document: Any, *, default_namespace: str) -> AuditSuites:
    """Validate the whole document up front, so a bad suite fails at start-up, not mid-ingest."""
    if document is None:
        return AuditSuites(by_table={})
    if not isinstance(document, Mapping):
        raise AuditSuiteError("audits file: the top level must be a mapping with a 'tables' key.")
    unknown = set(document) - {"tables", "defaults"}
    if unknown:
        raise AuditSuiteError(f"audits file: unknown top-level key(s) {', '.join(sorted(unknown))}.")
    tables = document.get("tables") or {}
    if not isinstance(tables, Mapping):
        raise AuditSuiteError("audits file: 'tables' must map table names to lists of checks.")
    by_table: dict[TableRef, AuditSuite] = {}
    for name, checks in tables.items():
        try:
            ref = table_ref_from(str(name), default_namespace=default_namespace, source="audits file")
        except InvalidTableNameError as exc:
            raise AuditSuiteError(str(exc)) from exc
        by_table[ref] = _suite_from(checks, str(name))
    default = DEFAULT_SUITE
    if "defaults" in document:
        default = _suite_from(document["defaults"], "defaults")
    return AuditSuites(by_table=by_table, default=default)
