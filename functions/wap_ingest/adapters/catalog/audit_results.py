"""The audit results tables (core.audit_results) as Iceberg tables in the lake, written and read from Python
(PyIceberg, committed to the run's branch by catalog.tables.BranchTables): no JVM, so a registered file's load
starts none for its results either.

`record` loads `wap_meta.<namespace>__<table>` on the branch (making it there, format v2, under the warehouse, if the
branch has none) and appends the load's rows as one Parquet file in one snapshot: one Nessie commit on the branch,
expecting the hash the table was read at. `rows` and `history` scan the table on a reference; `history` reads only
the metric rows' four columns it needs. Any engine reads the tables: `SELECT * FROM nessie.wap_meta.wap__orders`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from wap_ingest.adapters.catalog.tables import BranchTables, storage_errors
from wap_ingest.core.audit_results import COLUMNS, METRIC_CHECK, ResultRow, history_of, results_table
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import AuditResults

_DOUBLE = ("value",)
_TIME = ("recorded_at",)
PROPERTIES = {"format-version": "2", "write.parquet.compression-codec": "zstd",
              "comment": "wap-lake: the audit results of every audited load of one table (core.audit_results)"}


def iceberg_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, NestedField, StringType, TimestamptzType

    return Schema(*(NestedField(i, name, DoubleType() if name in _DOUBLE else TimestamptzType() if name in _TIME
                                else StringType(), required=False) for i, name in enumerate(COLUMNS, start=1)))


def arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(name, pa.float64() if name in _DOUBLE else pa.timestamp("us", tz="UTC")
                               if name in _TIME else pa.string()) for name in COLUMNS])


class LakeAuditResults(AuditResults):
    """Results tables under `warehouse` (`s3://lake/warehouse`), through `tables`."""

    def __init__(self, tables: BranchTables, warehouse: str) -> None:
        self.tables, self.warehouse = tables, warehouse.rstrip("/")

    def record(self, branch: str, table: TableRef, rows: Sequence[ResultRow]) -> None:
        if not rows:
            return
        import pyarrow as pa

        target = results_table(table)
        loaded = self.tables.load(target, branch)
        if loaded is None:
            location = f"{self.warehouse}/{target.namespace}/{target.name}_{uuid.uuid4().hex}"
            loaded = self.tables.create(target, branch, iceberg_schema(), location, PROPERTIES)
        data = pa.Table.from_pylist([{name: getattr(r, name) for name in COLUMNS} for r in rows],
                                    schema=arrow_schema())
        with storage_errors(f"appending {len(rows)} audit results to {target} on {branch!r}"):
            loaded.append(data)

    def rows(self, table: TableRef, ref: str) -> list[ResultRow]:
        found = self._scan(table, ref, None, COLUMNS)
        rows = [ResultRow(**{name: _plain(name, record[name]) for name in COLUMNS}) for record in found]
        return sorted(rows, key=lambda r: r.recorded_at)

    def history(self, table: TableRef, ref: str, wanted: Mapping[str, int]) -> dict[str, tuple[float, ...]]:
        if not wanted:
            return {}
        names = ", ".join(_quoted(name) for name in sorted(wanted))
        where = f"check = {_quoted(METRIC_CHECK)} AND metric IN ({names})"  # PyIceberg's filter syntax
        found = self._scan(table, ref, where, ("load", "metric", "value", "recorded_at"))
        return history_of(((r["load"], r["metric"], r["value"], r["recorded_at"]) for r in found), wanted)

    def _scan(self, table: TableRef, ref: str, where: Any, columns: Sequence[str]) -> list[dict[str, Any]]:
        loaded = self.tables.load(results_table(table), ref)
        if loaded is None or loaded.current_snapshot() is None:
            return []
        scan = loaded.scan(selected_fields=tuple(columns)) if where is None else loaded.scan(
            row_filter=where, selected_fields=tuple(columns))
        with storage_errors(f"reading {results_table(table)} on {ref!r}"):
            return list(scan.to_arrow().to_pylist())


def _quoted(text: str) -> str:
    """A string literal of PyIceberg's filter syntax (metric names are validated: core.anomaly.parse_metric)."""
    return "'" + text.replace("'", "''") + "'"


def _plain(name: str, value: Any) -> Any:
    if name in _TIME and value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value
