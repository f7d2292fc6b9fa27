"""What the fake writer measures that needs more than a count (tests/fakes.py): a column's profile, a reconcile
check's aggregate, and a table's rows as a reference has them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.fake_catalog import FakeCatalog, Rows
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import ColumnProfile


def aggregate(rows: Rows, aggregate: tuple[str, str | None]) -> float | None:
    """As the engine's (adapters.engine.references): count and sum of no values are 0, the others None."""
    function, column = aggregate
    if column is None:
        return float(len(rows))
    if rows and all(column not in r for r in rows):
        return None  # as the engine: the table has no such column
    values = [r[column] for r in rows if r.get(column) is not None]
    if function == "count":
        return float(len(values))
    values = [v.timestamp() if isinstance(v, datetime) else v for v in values]
    if any(isinstance(v, str | bytes | bool) for v in values):
        raise AuditSuiteError(f"fake: {function}({column}) of a text column; sum, min, max and avg take numbers")
    if function == "sum":
        return float(sum(values))
    if not values:
        return None
    return float({"min": min, "max": max}[function](values)) if function != "avg" else sum(values) / len(values)


def rows_on(catalog: FakeCatalog, ref: str, table: str) -> Rows:
    content = catalog.contents(ref).get(table)
    return [row for _, rows, _ in content["snapshots"] for row in rows] if content else []


def profile(values: list[Any]) -> ColumnProfile:
    """The profile the engine measures, exactly (the engine's distinct count is an estimate)."""
    present = [v for v in values if v is not None]
    if not values:
        return ColumnProfile()
    numbers = [float(v) for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
    numeric = bool(present) and len(numbers) == len(present)
    return ColumnProfile(null_share=(len(values) - len(present)) / len(values), distinct=float(len(set(present))),
                         min=min(numbers) if numeric else None, max=max(numbers) if numeric else None,
                         mean=sum(numbers) / len(numbers) if numeric else None)
