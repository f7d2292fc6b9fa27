"""Audit suites: the checks of each table, evaluated on the engine's measurements of the new rows.

The document shape (YAML in `audits.yml`; parsing YAML is the config layer's job, validation is here):

    tables:
      customer_data_log:            # `<table>` (default namespace) or `<namespace>.<table>`
        - check: not_null
          columns: [my_col_1]
        - check: row_count
          min: 1
          severity: warn            # error (default): reject the run; warn: publish and alert
    defaults:                       # optional: the suite of tables not listed (default: row_count min 1)
      - check: row_count
        min: 1

Every check of a suite contributes to one MeasurementPlan, so the engine measures all of them together,
and the suite is evaluated without further calls. `audits.yml` documents each check with an example.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .durations import format_age, parse_duration
from .errors import AuditSuiteError, ConfigError, InvalidTableNameError
from .models import (
    AuditReport,
    CheckResult,
    CheckStatus,
    MeasurementPlan,
    Measurements,
    RowRule,
    Sample,
    Scalar,
    TableRef,
    sample_key,
)
from .naming import table_ref_from

SEVERITIES = ("error", "warn")
NEW_COLUMN_POLICIES = ("reject", "allow")
NEW_ROWS_VIEW = "new_rows"  # the view custom_sql queries read


@dataclass(frozen=True)
class AuditContext:
    """What a check may need beyond the measurements: the clock and the rows of earlier published loads."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    history: tuple[int, ...] = ()  # rows of the last published loads of the table, newest first


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
class RowCount(Check):
    min: int | None = None
    max: int | None = None
    severity: str = "error"
    kind = "row_count"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan()

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        rows = measured.row_count
        ok = (self.min is None or rows >= self.min) and (self.max is None or rows <= self.max)
        bounds = []
        if self.min is not None:
            bounds.append(f">= {self.min}")
        if self.max is not None:
            bounds.append(f"<= {self.max}")
        return [self._result("rows", ok, f"{rows} rows", " and ".join(bounds))]


_TYPE_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "bool": "boolean",
                 "real": "float", "str": "string"}
_TYPES = {"int", "bigint", "smallint", "tinyint", "string", "double", "float", "boolean", "date", "timestamp",
          "timestamp_ntz", "binary"}
_DECIMAL = re.compile(r"decimal\(\d{1,2},\d{1,2}\)")


def type_name(text: str) -> str:
    """The engine's spelling of a type name (`long` -> `bigint`), lower case, no spaces."""
    name = text.strip().lower().replace(" ", "")
    return _TYPE_ALIASES.get(name, name)


@dataclass(frozen=True)
class Schema(Check):
    columns: Mapping[str, str]  # required column -> type
    new_columns: str = "reject"  # the file's columns the table does not have: reject, or allow (added on the branch)
    severity: str = "error"
    kind = "schema"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan()

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        problems = []
        for column, wanted in self.columns.items():
            name = _present(measured, column)
            if name is None:
                problems.append(f"missing {column} ({wanted})")
                continue
            found = type_name(measured.types.get(name, "?"))
            if found != type_name(wanted):
                problems.append(f"{column} is {found}, not {type_name(wanted)}")
        expected = ", ".join(f"{c} {type_name(t)}" for c, t in self.columns.items())
        expected += f"; new columns: {self.new_columns}"
        text = "; ".join(problems) or "required columns present with their types"
        if measured.added_columns:
            text += f"; added on the branch: {', '.join(measured.added_columns)}"
        return [self._result("columns", not problems, text, expected)]


def _iso(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1_000_000, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Freshness(Check):
    column: str
    max_age: timedelta
    max_age_text: str
    severity: str = "error"
    kind = "freshness"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(max_columns=(self.column,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        expected = f"newest value at most {self.max_age_text} old"
        name = _present(measured, self.column)
        if name is None:
            return [self._missing(self.column, expected)]
        newest = measured.newest.get(name, measured.newest.get(self.column))
        if newest is None:
            return [self._result(self.column, False, "no values", expected)]
        age = context.now - datetime.fromtimestamp(newest / 1_000_000, UTC)
        shown = format_age(age) if age >= timedelta(0) else "in the future"
        return [self._result(self.column, age <= self.max_age, f"newest {_iso(newest)} ({shown} old)", expected)]


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


@dataclass(frozen=True)
class RowCountVsHistory(Check):
    factor: float
    last: int = 10
    min_loads: int = 3
    severity: str = "error"
    kind = "row_count_vs_history"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan()

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        loads = context.history[: self.last]
        rows = measured.row_count
        if len(loads) < self.min_loads:
            return [self._result("rows", True, f"{rows} rows; {len(loads)} earlier loads, too few to compare",
                                 f"at least {self.min_loads} earlier loads")]
        average = sum(loads) / len(loads)
        low, high = average / self.factor, average * self.factor
        ratio = rows / average if average else float("inf")
        return [self._result("rows", low <= rows <= high,
                             f"{rows} rows = {ratio:.2f}x the average {average:.0f} of the last {len(loads)} loads",
                             f"between {low:.0f} and {high:.0f} rows (factor {self.factor:g})")]


@dataclass(frozen=True)
class AuditSuite:
    checks: tuple[Check, ...]

    def plan(self) -> MeasurementPlan:
        plan = MeasurementPlan()
        for check in self.checks:
            plan = plan.merged(check.plan())
        return plan

    @property
    def history_loads(self) -> int:
        """How many earlier published loads the suite compares with (0: it needs no history)."""
        return max((c.last for c in self.checks if isinstance(c, RowCountVsHistory)), default=0)

    @property
    def allow_new_columns(self) -> bool:
        """The schema policy: may a file add columns to the table (on the branch, published by the merge)?"""
        return any(isinstance(c, Schema) and c.new_columns == "allow" for c in self.checks)


DEFAULT_SUITE = AuditSuite((RowCount(min=1),))


@dataclass(frozen=True)
class AuditSuites:
    by_table: Mapping[TableRef, AuditSuite]
    default: AuditSuite = DEFAULT_SUITE

    def suite_for(self, table: TableRef) -> AuditSuite:
        return self.by_table.get(table, self.default)


def audit(
    suite: AuditSuite, table: TableRef, measured: Measurements, context: AuditContext | None = None
) -> AuditReport:
    context = context or AuditContext()
    results: list[CheckResult] = []
    for check in suite.checks:
        results.extend(check.evaluate(measured, context))
    return AuditReport(table=table.qualified, rows=measured.row_count, checks=tuple(results))


# --- parsing -------------------------------------------------------------------------------------

COMMON_KEYS = {"check", "severity"}
ALLOWED_KEYS: dict[str, set[str]] = {
    "not_null": {"columns"},
    "unique": {"columns", "against_main"},
    "accepted_values": {"column", "values"},
    "range": {"column", "min", "max"},
    "regex": {"column", "pattern"},
    "row_count": {"min", "max"},
    "schema": {"columns", "new_columns"},
    "freshness": {"column", "max_age"},
    "custom_sql": {"sql", "name"},
    "row_count_vs_history": {"factor", "last", "min_loads"},
}
_COLUMN = re.compile(r"[^`.\s][^`.\n\r\t]{0,127}")
_SQL_START = re.compile(r"\s*(select|with)\b", re.IGNORECASE)
_VIEW = re.compile(rf"\b{NEW_ROWS_VIEW}\b", re.IGNORECASE)


def _where(table: str, index: int, kind: str | None = None) -> str:
    label = f"check #{index + 1}" + (f" ({kind})" if kind else "")
    return f"audits file: table {table!r}, {label}"


def _column_name(value: object, key: str, where: str) -> str:
    if not isinstance(value, str) or not _COLUMN.fullmatch(value) or value != value.strip():
        raise AuditSuiteError(
            f"{where}: key {key!r}: {value!r} is not a column name (1-128 characters, no backtick, dot, tab or "
            f"newline, no surrounding spaces). Fix: write the column's name as the table spells it."
        )
    return value


def _columns(spec: Mapping[str, Any], where: str) -> tuple[str, ...]:
    cols = spec.get("columns")
    if isinstance(cols, str):
        cols = [cols]
    if not isinstance(cols, list) or not cols:
        raise AuditSuiteError(f"{where}: key 'columns' must be a non-empty list of column names.")
    return tuple(_column_name(c, "columns", where) for c in cols)


def _number(spec: Mapping[str, Any], key: str, where: str) -> int | float | None:
    value: object = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AuditSuiteError(f"{where}: key {key!r} must be a number, got {value!r}.")
    return value


def _optional_int(spec: Mapping[str, Any], key: str, where: str, *, least: int = 0) -> int | None:
    value: object = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "a non-negative integer" if least == 0 else f"an integer >= {least}"
        raise AuditSuiteError(f"{where}: key {key!r} must be {what}, got {value!r}.")
    return value


def _bounds(low: int | float | None, high: int | float | None, where: str) -> None:
    if low is None and high is None:
        raise AuditSuiteError(f"{where}: give 'min', 'max' or both.")
    if low is not None and high is not None and low > high:
        raise AuditSuiteError(f"{where}: 'min' ({low}) is greater than 'max' ({high}).")


def _required(spec: Mapping[str, Any], key: str, where: str) -> Any:
    if spec.get(key) is None:
        raise AuditSuiteError(f"{where}: key {key!r} is required.")
    return spec[key]


def _rule_check(kind: str, spec: Mapping[str, Any], where: str, severity: str) -> Check:
    column = _column_name(_required(spec, "column", where), "column", where)
    key = f"{kind}:{column}"
    if kind == "accepted_values":
        values = spec.get("values")
        if not isinstance(values, list) or not values or not all(isinstance(v, str | int | float) for v in values):
            raise AuditSuiteError(f"{where}: key 'values' must be a non-empty list of strings or numbers.")
        scalars: tuple[Scalar, ...] = tuple(values)
        shown = ", ".join(repr(v) for v in scalars[:10]) + (", ..." if len(scalars) > 10 else "")
        return RuleCheck(RowRule(key, kind, column, values=scalars), f"values in [{shown}]", severity)
    if kind == "range":
        low, high = _number(spec, "min", where), _number(spec, "max", where)
        _bounds(low, high, where)
        shown = " and ".join(t for t in (f">= {low}" if low is not None else "",
                                          f"<= {high}" if high is not None else "") if t)
        return RuleCheck(RowRule(key, kind, column, low=low, high=high), f"values {shown}", severity)
    pattern = _required(spec, "pattern", where)
    try:
        if not isinstance(pattern, str):
            raise TypeError(f"{pattern!r} is not a string")
        re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise AuditSuiteError(f"{where}: key 'pattern' is not a valid regular expression ({exc}).") from exc
    return RuleCheck(RowRule(key, kind, column, pattern=pattern), f"values fully matching /{pattern}/", severity)


def _schema(spec: Mapping[str, Any], where: str, severity: str) -> Check:
    columns = spec.get("columns")
    if not isinstance(columns, Mapping) or not columns:
        raise AuditSuiteError(f"{where}: key 'columns' must map each required column to its type, e.g. {{id: bigint}}.")
    required: dict[str, str] = {}
    for name, kind in columns.items():
        column = _column_name(name, "columns", where)
        if not isinstance(kind, str) or not (type_name(kind) in _TYPES or _DECIMAL.fullmatch(type_name(kind))):
            raise AuditSuiteError(
                f"{where}: key 'columns': column {column!r} has type {kind!r}, which is not one of "
                f"{', '.join(sorted(_TYPES))} or decimal(p,s)."
            )
        required[column] = kind
    policy = spec.get("new_columns", "reject")
    if policy not in NEW_COLUMN_POLICIES:
        raise AuditSuiteError(f"{where}: key 'new_columns' must be 'reject' or 'allow', got {policy!r}.")
    return Schema(required, policy, severity)


def _custom_sql(spec: Mapping[str, Any], where: str, severity: str, index: int) -> Check:
    sql = spec.get("sql")
    valid = isinstance(sql, str) and _SQL_START.match(sql) and _VIEW.search(sql)
    if not isinstance(sql, str) or not valid or ";" in sql.rstrip().rstrip(";"):
        raise AuditSuiteError(
            f"{where}: key 'sql' must be one SELECT (or WITH) query over the view `{NEW_ROWS_VIEW}` that returns the "
            f"bad rows, e.g. \"SELECT * FROM {NEW_ROWS_VIEW} WHERE amount < 0\"."
        )
    name = spec.get("name", f"custom_sql #{index + 1}")
    if not isinstance(name, str) or not name.strip():
        raise AuditSuiteError(f"{where}: key 'name' must be a non-empty string.")
    return CustomSql(sql.strip().rstrip(";"), name, severity)


def _history(spec: Mapping[str, Any], where: str, severity: str) -> Check:
    factor = _number(spec, "factor", where)
    if factor is None or factor <= 1:
        raise AuditSuiteError(f"{where}: key 'factor' must be a number greater than 1 (e.g. 3: between a third "
                              f"and three times the average), got {spec.get('factor')!r}.")
    last = _optional_int(spec, "last", where, least=1) or 10
    min_loads = _optional_int(spec, "min_loads", where, least=1) or min(3, last)
    if min_loads > last:
        raise AuditSuiteError(f"{where}: 'min_loads' ({min_loads}) is greater than 'last' ({last}).")
    return RowCountVsHistory(float(factor), last, min_loads, severity)


def _check_from(spec: Any, table: str, index: int) -> Check:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("check"), str):
        raise AuditSuiteError(f"{_where(table, index)}: each check is a mapping with a 'check' key.")
    kind = spec["check"]
    where = _where(table, index, kind)
    if kind not in ALLOWED_KEYS:
        raise AuditSuiteError(
            f"{where}: unknown check {kind!r}; known checks: {', '.join(sorted(ALLOWED_KEYS))}."
        )
    unknown = set(spec) - ALLOWED_KEYS[kind] - COMMON_KEYS
    if unknown:
        allowed = ", ".join(sorted(ALLOWED_KEYS[kind] | {"severity"}))
        raise AuditSuiteError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {allowed}.")
    severity = spec.get("severity", "error")
    if severity not in SEVERITIES:
        raise AuditSuiteError(f"{where}: key 'severity' must be 'error' (reject) or 'warn' (publish and alert), "
                              f"got {severity!r}.")
    if kind == "not_null":
        return NotNull(_columns(spec, where), severity)
    if kind == "unique":
        against = spec.get("against_main", True)
        if not isinstance(against, bool):
            raise AuditSuiteError(f"{where}: key 'against_main' must be true or false, got {against!r}.")
        return Unique(_columns(spec, where), against, severity)
    if kind in ("accepted_values", "range", "regex"):
        return _rule_check(kind, spec, where, severity)
    if kind == "row_count":
        low, high = _optional_int(spec, "min", where), _optional_int(spec, "max", where)
        _bounds(low, high, where)
        return RowCount(min=low, max=high, severity=severity)
    if kind == "schema":
        return _schema(spec, where, severity)
    if kind == "freshness":
        column = _column_name(_required(spec, "column", where), "column", where)
        text = str(_required(spec, "max_age", where))
        try:
            age = parse_duration(text, option="max_age")
        except ConfigError as exc:
            raise AuditSuiteError(f"{where}: {exc}") from exc
        return Freshness(column, age, text, severity)
    if kind == "custom_sql":
        return _custom_sql(spec, where, severity, index)
    return _history(spec, where, severity)


def _suite_from(checks: Any, table: str) -> AuditSuite:
    if not isinstance(checks, Sequence) or isinstance(checks, str):
        raise AuditSuiteError(f"audits file: table {table!r}: expected a list of checks.")
    suite = AuditSuite(tuple(_check_from(spec, table, i) for i, spec in enumerate(checks)))
    if sum(isinstance(c, Schema) for c in suite.checks) > 1:
        raise AuditSuiteError(f"audits file: table {table!r}: more than one schema check; keep one.")
    return suite


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
