"""The audits document validated into suites: every error names the table, the check and the key."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from wap_ingest.core.durations import parse_duration
from wap_ingest.core.errors import AuditSuiteError, ConfigError, InvalidTableNameError
from wap_ingest.core.formats import FormatOptions, format_options_from
from wap_ingest.core.layout import Layout, layout_from
from wap_ingest.core.maintenance import DEFAULT_MAINTENANCE, maintenance_from
from wap_ingest.core.measurements import RowRule, Scalar
from wap_ingest.core.models import TableRef
from wap_ingest.core.naming import table_ref_from

from .base import NEW_COLUMN_POLICIES, NEW_ROWS_VIEW, SEVERITIES, Check
from .cross import RECONCILE_KEYS, REFERENCES_KEYS, reconcile_from, references_from
from .learned import ANOMALY_KEYS, anomaly_from
from .rows import CustomSql, NotNull, RuleCheck, Unique
from .suite import DEFAULT_SUITE, AuditSuite, AuditSuites
from .table import _DECIMAL, _TYPES, Freshness, RowCount, RowCountVsHistory, Schema, type_name

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
    "anomaly": ANOMALY_KEYS,
    "references": REFERENCES_KEYS,
    "reconcile": RECONCILE_KEYS,
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


def _check_from(spec: Any, table: str, index: int, namespace: str) -> Check:
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
    if kind == "anomaly":
        return anomaly_from(spec, where, severity)
    if kind == "references":
        return references_from(_column_name(spec.get("column"), "column", where), spec.get("table"),
                               _column_name(spec.get("key"), "key", where), where, severity, namespace)
    if kind == "reconcile":
        return reconcile_from(spec, where, severity, namespace, _column_name)
    return _history(spec, where, severity)


TABLE_KEYS = {"checks", "samples", "mask", "format_options", "on_failure", "max_quarantined_fraction", "layout",
              "maintenance", "write"}
ON_FAILURE = ("reject", "quarantine")
WRITE = ("auto", "register", "rewrite")


def _write(entry: Mapping[str, Any], table: str, on_failure: str, layout: Layout) -> str:
    """The table's `write:` (auto: register a Parquet file that fits the table, rewrite any other; register: refuse a
    file that cannot be registered; rewrite: always rewrite). `register` with a setting that always rewrites is
    refused here, at start-up, rather than failing every file."""
    write = entry.get("write", "auto")
    if write not in WRITE:
        raise AuditSuiteError(f"audits file: table {table!r}: write must be auto, register or rewrite, got {write!r}.")
    if write == "register" and on_failure == "quarantine":
        raise AuditSuiteError(f"audits file: table {table!r}: write: register cannot keep a file's good rows apart "
                              f"(on_failure: quarantine writes them as a new file). Fix: use write: auto (files are "
                              f"then rewritten) or on_failure: reject.")
    if write == "register" and layout.sort:
        raise AuditSuiteError(f"audits file: table {table!r}: write: register cannot sort a file's rows (layout "
                              f"sort_by writes them in order). Fix: use write: auto (files are then rewritten) or "
                              f"drop sort_by.")
    return str(write)


def _quarantine(entry: Mapping[str, Any], table: str) -> tuple[str, float]:
    on_failure = entry.get("on_failure", "reject")
    if on_failure not in ON_FAILURE:
        raise AuditSuiteError(f"audits file: table {table!r}: on_failure must be reject or quarantine, got "
                              f"{on_failure!r}.")
    fraction = entry.get("max_quarantined_fraction", 0.05)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise AuditSuiteError(f"audits file: table {table!r}: max_quarantined_fraction must be a number above 0 "
                              f"and at most 1 (0.05: at most 5% of a file's rows), got {fraction!r}.")
    if "max_quarantined_fraction" in entry and on_failure != "quarantine":
        raise AuditSuiteError(f"audits file: table {table!r}: max_quarantined_fraction applies with on_failure: "
                              f"quarantine only; add it or remove the fraction.")
    return str(on_failure), float(fraction)


def _suite_from(entry: Any, table: str, namespace: str) -> AuditSuite:
    """A table's entry: a list of checks (shorthand for `checks:`), or a mapping with `checks`, `samples`, `mask`,
    `format_options`."""
    samples: bool = True
    mask: tuple[str, ...] = ()
    options: FormatOptions = ()
    on_failure, fraction, layout, maintenance, write = "reject", 0.05, Layout(), DEFAULT_MAINTENANCE, "auto"
    checks = entry
    if isinstance(entry, Mapping) and "check" in entry:
        raise AuditSuiteError(f"audits file: table {table!r}: expected a list of checks (or a mapping with "
                              f"'checks:'); this looks like a single check: put it in a list.")
    if isinstance(entry, Mapping):
        unknown = set(entry) - TABLE_KEYS
        if unknown:
            raise AuditSuiteError(f"audits file: table {table!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}"
                                  f"; a table's entry takes {', '.join(sorted(TABLE_KEYS))}.")
        checks = entry.get("checks", [])
        samples = entry.get("samples", True)
        if not isinstance(samples, bool):
            raise AuditSuiteError(f"audits file: table {table!r}: key 'samples' must be true or false, got "
                                  f"{samples!r}.")
        raw = entry.get("mask", [])
        if not isinstance(raw, list):
            raise AuditSuiteError(f"audits file: table {table!r}: key 'mask' must be a list of column names, got "
                                  f"{raw!r}.")
        mask = tuple(_column_name(c, "mask", f"audits file: table {table!r}") for c in raw)
        if "format_options" in entry:
            options = format_options_from(entry["format_options"], table)
        on_failure, fraction = _quarantine(entry, table)
        layout = layout_from(entry["layout"], table) if "layout" in entry else Layout()
        if "maintenance" in entry:
            maintenance = maintenance_from(entry["maintenance"], table)
        write = _write(entry, table, on_failure, layout)
    if not isinstance(checks, Sequence) or isinstance(checks, str):
        raise AuditSuiteError(f"audits file: table {table!r}: expected a list of checks.")
    suite = AuditSuite(tuple(_check_from(spec, table, i, namespace) for i, spec in enumerate(checks)), samples, mask,
                       options, on_failure, fraction, layout, maintenance, write)
    if sum(isinstance(c, Schema) for c in suite.checks) > 1:
        raise AuditSuiteError(f"audits file: table {table!r}: more than one schema check; keep one.")
    return suite


def suites_from(document: Any, *, default_namespace: str) -> AuditSuites:
    """Validate the whole document up front, so a bad suite fails at start-up, not mid-ingest."""
    if document is None:
        return AuditSuites(by_table={})
    if not isinstance(document, Mapping):
        raise AuditSuiteError("audits file: the top level must be a mapping with a 'tables' key.")
    unknown = set(document) - {"tables", "defaults", "strict_tables"}
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
        by_table[ref] = _suite_from(checks, str(name), ref.namespace)
    default = DEFAULT_SUITE
    if "defaults" in document:
        default = _suite_from(document["defaults"], "defaults", default_namespace)
    strict = document.get("strict_tables", False)
    if not isinstance(strict, bool):
        raise AuditSuiteError(f"audits file: 'strict_tables' must be true or false, got {strict!r}.")
    return AuditSuites(by_table=by_table, default=default, strict_tables=strict)
