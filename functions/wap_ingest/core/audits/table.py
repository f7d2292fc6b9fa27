"""Table-level checks: the file as a whole (row_count, schema, freshness, row_count_vs_history)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from wap_ingest.core.durations import format_age
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import CheckResult

from .base import AuditContext, Check, _present


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
