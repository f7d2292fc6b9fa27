"""Checks that look at other tables (issue 36, item 3): `references`, every non-null value of a column of the new
rows is a key of another table, as the run's branch has it (main's rows, and a multi-table load's files written
before this one: core.pipeline.loads writes a referenced table's files first).

    references: {column: customer_id, table: customers, key: id}

`table` is `<table>` (the audited table's namespace) or `<namespace>.<table>`. The engine reads only the other
table's key column, between the new values' smallest and largest (the table's files whose bounds miss that range are
skipped, as `unique` against main skips them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import MeasurementPlan, Measurements, Reference, sample_key
from wap_ingest.core.models import CheckResult

from .base import AuditContext, Check, _present

REFERENCES_KEYS = {"column", "table", "key"}
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
    if not isinstance(table, str) or not re.fullmatch(rf"({_NAME}\.)?{_NAME}", table.strip().lower()):
        raise AuditSuiteError(f"{where}: key 'table' must name a table as <table> or <namespace>.<table> (letters, "
                              f"digits and underscores), got {table!r}.")
    qualified = table.strip().lower() if "." in table else f"{namespace}.{table.strip().lower()}"
    return References(Reference(column, qualified, key), severity)
