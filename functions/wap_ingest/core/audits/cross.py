"""Checks that look at other tables (issue 36, item 3), each reading the other table as the run's branch has it
(main's rows, and a multi-table load's files written before this one: core.pipeline.loads writes a table another
file's check reads first).

    references: {column: customer_id, table: customers, key: id}
    reconcile: {aggregate: sum(amount), table: order_lines, against: sum(line_amount), tolerance: 0.01}

`references`: every non-null value of a column of the new rows is a key of the other table. The engine reads only
the other table's key column, between the new values' smallest and largest (the table's files whose bounds miss
that range are skipped, as `unique` against main skips them).

`reconcile`: an aggregate of the audited table after the load (main's rows and the new ones) equals an aggregate of
the other table, within `tolerance` (absolute, default 0): the header's totals against the lines', a copy's row
count against its source's. Aggregates by allow list: count(*), count(c), sum(c), min(c), max(c), avg(c) (count and
sum of no rows are 0). The engine reads only the two named columns, of every file of both tables.

`table` is `<table>` (the audited table's namespace) or `<namespace>.<table>`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import (
    MeasurementPlan,
    Measurements,
    Reconciliation,
    Reference,
    aggregate_text,
    sample_key,
)
from wap_ingest.core.models import CheckResult

from .base import AuditContext, Check, _present

REFERENCES_KEYS = {"column", "table", "key"}
RECONCILE_KEYS = {"aggregate", "table", "against", "tolerance"}
AGGREGATES = ("count", "sum", "min", "max", "avg")
_AGGREGATE = re.compile(r"(?i)\s*(count|sum|min|max|avg)\s*\(([^()]*)\)\s*")  # one function of one column
_NAME = r"[a-z_][a-z0-9_]{0,127}"


@dataclass(frozen=True)
class References(Check):
    reference: Reference
    severity: str = "error"
    kind = "references"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(references=(self.reference,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        ref = self.reference
        expected = f"every non-null {ref.column} is a {ref.key} of {ref.table}"
        if _present(measured, ref.column) is None:
            return [self._missing(ref.name, expected)]
        missing = measured.missing.get(ref.name, 0)
        absent = f" ({ref.table} does not exist on main)" if ref.table in measured.absent else ""
        return [self._result(ref.name, missing == 0, f"{missing} rows with a {ref.column} that is no {ref.key} of "
                             f"{ref.table}{absent}", expected,
                             measured.samples.get(sample_key(self.kind, ref.name), ()))]


def references_from(column: str, table: object, key: str, where: str, severity: str, namespace: str) -> References:
    """The check as the audits file gives it (`column` and `key` are validated column names already)."""
    return References(Reference(column, _table(table, where, namespace), key), severity)


@dataclass(frozen=True)
class Reconcile(Check):
    reconciliation: Reconciliation
    tolerance: float = 0.0
    severity: str = "error"
    kind = "reconcile"

    def plan(self) -> MeasurementPlan:
        return MeasurementPlan(reconciliations=(self.reconciliation,))

    def evaluate(self, measured: Measurements, context: AuditContext) -> list[CheckResult]:
        rec = self.reconciliation
        within = f" within {self.tolerance:g}" if self.tolerance else ""
        expected = f"{aggregate_text(rec.ours)} = {aggregate_text(rec.theirs)} of {rec.table}{within}"
        ours, theirs = measured.reconciled.get(rec.name, (None, None))
        if rec.table in measured.absent:
            return [self._result(rec.name, False, f"{rec.table} does not exist on main", expected)]
        ok = ours == theirs if ours is None or theirs is None else abs(ours - theirs) <= self.tolerance
        difference = "" if ours is None or theirs is None else f" (difference {ours - theirs:g})"
        return [self._result(rec.name, ok, f"{aggregate_text(rec.ours)} = {_shown(ours)}, {rec.table}'s "
                             f"{aggregate_text(rec.theirs)} = {_shown(theirs)}{difference}", expected)]


def reconcile_from(spec: Mapping[str, Any], where: str, severity: str, namespace: str,
                   column: Callable[[object, str, str], str]) -> Reconcile:
    """The check as the audits file gives it; `column` validates a column name (parse._column_name)."""
    tolerance = spec.get("tolerance", 0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not tolerance >= 0:
        raise AuditSuiteError(f"{where}: key 'tolerance' must be a number >= 0, got {tolerance!r}.")
    ours = _aggregate(spec.get("aggregate"), "aggregate", where, column)
    theirs = _aggregate(spec.get("against"), "against", where, column)
    return Reconcile(Reconciliation(ours, _table(spec.get("table"), where, namespace), theirs), float(tolerance),
                     severity)


def _aggregate(value: object, key: str, where: str, column: Callable[[object, str, str], str]
               ) -> tuple[str, str | None]:
    found = _AGGREGATE.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise AuditSuiteError(f"{where}: key {key!r} must be one of {', '.join(f'{a}(column)' for a in AGGREGATES)} "
                              f"or count(*), got {value!r}.")
    function, inner = found.group(1).lower(), found.group(2).strip()
    if inner == "*":
        if function != "count":
            raise AuditSuiteError(f"{where}: key {key!r}: only count takes *, got {value!r}.")
        return function, None
    return function, column(inner, key, where)


def _table(table: object, where: str, namespace: str) -> str:
    if not isinstance(table, str) or not re.fullmatch(rf"({_NAME}\.)?{_NAME}", table.strip().lower()):
        raise AuditSuiteError(f"{where}: key 'table' must name a table as <table> or <namespace>.<table> (letters, "
                              f"digits and underscores), got {table!r}.")
    return table.strip().lower() if "." in table else f"{namespace}.{table.strip().lower()}"


def _shown(value: float | None) -> str:
    return "no value" if value is None else f"{value:g}"
