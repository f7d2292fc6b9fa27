"""The audit results tables (core.audit_results) as Iceberg tables in the lake, written and read from Python
(PyIceberg, committed to the run's branch by catalog.tables.BranchTables): no JVM, so a registered file's load
starts none for its results either.

`record` loads `wap_meta.<namespace>__<table>` on the branch (making it there, format v2, under the warehouse, if the
branch has none) and appends the load's rows as one Parquet file in one snapshot: one Nessie commit on the branch,
expecting the hash the table was read at. A results table gets a snapshot per load, and its metadata file (which every
append rewrites, and PyIceberg copies once per metadata change it applies) would list them all: once it lists more
than twice `keep_snapshots`, the same commit drops all but the newest `keep_snapshots` of the current snapshot's
history from it (metadata only: no file deleted, every row kept). `rows` scans the table on a reference. Any engine
reads the tables: `SELECT * FROM nessie.wap_meta.wap__orders`.

`history` keeps, per results table, the metric rows (four columns) it read and the snapshot it read them at. Next
time, the table's current snapshot is loaded (two requests); if it is the same, nothing else is read; if the
snapshots since the one read are all appends (each load's), only the data files they added are read (one manifest
list, one manifest and one file per load; none for a load this process appended itself, whose metric rows it kept
by the snapshot its commit made: a warm function's own loads, merged into main since); anything else (a compaction,
a snapshot the walk cannot reach) reads the
table's metric rows again in full. The rows are exactly the table's at its current snapshot either way.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from wap_ingest.adapters.catalog.tables import BranchTables, storage_errors
from wap_ingest.core.audit_results import COLUMNS, METRIC_CHECK, ResultRow, history_of, results_table
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import AuditResults

_DOUBLE = ("value",)
_TIME = ("recorded_at",)
PROPERTIES = {"format-version": "2", "write.parquet.compression-codec": "zstd",
              "write.metadata.previous-versions-max": "10",  # the metadata log a metadata file lists (default 100)
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


MetricRow = tuple[str, str, float | None, datetime]  # load, metric, value, recorded_at
HISTORY_COLUMNS = ("load", "metric", "value", "recorded_at")
MAX_WALK = 200  # snapshots walked back to the one read before (more: read the table again)
# Snapshots a results table's metadata keeps listing: its rows say when each load was recorded, so its snapshots serve
# only the incremental history read (a reader further behind reads the table again). PyIceberg deep-copies the
# metadata each time a transaction's metadata is asked for (about 19 times an append): 19 copies took 14 ms listing
# 20 snapshots and 10 log entries, 69 ms listing 100 and 100 (benchmarks/results/metadata_copies.json).
KEEP_SNAPSHOTS = 10
MINE = 256  # the snapshots this process appended whose metric rows it keeps (the oldest forgotten first)


@dataclass(frozen=True)
class _Read:
    snapshot_id: int
    rows: tuple[MetricRow, ...]


class LakeAuditResults(AuditResults):
    """Results tables under `warehouse` (`s3://lake/warehouse`), through `tables`."""

    def __init__(self, tables: BranchTables, warehouse: str, *, keep_snapshots: int = KEEP_SNAPSHOTS) -> None:
        self.tables, self.warehouse, self.keep_snapshots = tables, warehouse.rstrip("/"), keep_snapshots
        self._read: dict[TableRef, _Read] = {}  # the metric rows of each results table as last read (history)
        self._mine: dict[int, tuple[MetricRow, ...]] = {}  # the metric rows of the snapshots this process appended

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
        with (storage_errors(f"appending {len(rows)} audit results to {target} on {branch!r}"),
              loaded.transaction() as transaction):
            transaction.append(data)
            dropped = beyond(loaded.metadata, self.keep_snapshots)
            if dropped:
                from pyiceberg.table.update.snapshot import ExpireSnapshots

                ExpireSnapshots(transaction).by_ids(dropped).commit()
        made = loaded.current_snapshot()  # the table as the commit left it
        if made is not None:
            while len(self._mine) >= MINE:
                self._mine.pop(next(iter(self._mine)))
            self._mine[made.snapshot_id] = tuple((r.load, r.metric or "", r.value, r.recorded_at) for r in rows
                                                 if r.check == METRIC_CHECK)

    def rows(self, table: TableRef, ref: str) -> list[ResultRow]:
        found = self._scan(table, ref, None, COLUMNS)
        rows = [ResultRow(**{name: _plain(name, record[name]) for name in COLUMNS}) for record in found]
        return sorted(rows, key=lambda r: r.recorded_at)

    def history(self, table: TableRef, ref: str, wanted: Mapping[str, int]) -> dict[str, tuple[float, ...]]:
        if not wanted:
            return {}
        target = results_table(table)
        loaded = self.tables.load(target, ref)
        current = None if loaded is None else loaded.current_snapshot()
        if loaded is None or current is None:
            return history_of((), wanted)
        known = self._read.get(target)
        if known is not None and known.snapshot_id == current.snapshot_id:
            rows = known.rows
        else:
            with storage_errors(f"reading {target} on {ref!r}"):
                added = None if known is None else _added_since(loaded, current, known.snapshot_id, self._mine)
                if known is not None and added is not None:
                    rows = known.rows + tuple(row for piece in added for row in (
                        piece if isinstance(piece, tuple) else _metric_rows_of(loaded, piece)))
                else:
                    scan = loaded.scan(row_filter=f"check = {_quoted(METRIC_CHECK)}", selected_fields=HISTORY_COLUMNS)
                    rows = tuple(_metric_row(r) for r in scan.to_arrow().to_pylist())
            self._read[target] = _Read(current.snapshot_id, rows)
        return history_of(rows, wanted)

    def _scan(self, table: TableRef, ref: str, where: Any, columns: Sequence[str]) -> list[dict[str, Any]]:
        loaded = self.tables.load(results_table(table), ref)
        if loaded is None or loaded.current_snapshot() is None:
            return []
        scan = loaded.scan(selected_fields=tuple(columns)) if where is None else loaded.scan(
            row_filter=where, selected_fields=tuple(columns))
        with storage_errors(f"reading {results_table(table)} on {ref!r}"):
            return list(scan.to_arrow().to_pylist())


def beyond(metadata: Any, keep: int) -> list[int]:
    """The snapshots to drop from a metadata file listing more than twice `keep`: all but the newest `keep` of the
    current snapshot's history, and none a reference points at (none: it lists at most twice `keep`)."""
    if len(metadata.snapshots) <= 2 * keep or metadata.current_snapshot_id is None:
        return []
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    kept: set[int] = set()
    snapshot = by_id.get(metadata.current_snapshot_id)
    while snapshot is not None and len(kept) < keep:
        kept.add(snapshot.snapshot_id)
        snapshot = by_id.get(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None else None
    kept |= {ref.snapshot_id for ref in metadata.refs.values()}
    return [s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in kept]


def _added_since(loaded: Any, current: Any, since: int, mine: Mapping[int, tuple[MetricRow, ...]]
                 ) -> list[str | tuple[MetricRow, ...]] | None:
    """What the snapshots after `since` added, up to `current`, if each of them is an append (None: a compaction, a
    delete, or `since` out of reach: read the table in full): the metric rows of a snapshot this process appended
    (`mine`), else the paths of the data files the snapshot added."""
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation

    paths: list[str | tuple[MetricRow, ...]] = []
    snapshot = current
    for _ in range(MAX_WALK):
        if snapshot.snapshot_id == since:
            return paths
        if snapshot.summary is None or snapshot.summary.operation != Operation.APPEND:
            return None
        own = mine.get(snapshot.snapshot_id)
        paths += [own] if own is not None else [entry.data_file.file_path for manifest in snapshot.manifests(loaded.io)
                  if manifest.added_snapshot_id == snapshot.snapshot_id
                  for entry in manifest.fetch_manifest_entry(loaded.io, discard_deleted=True)
                  if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id]
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else loaded.snapshot_by_id(parent)
        if snapshot is None:
            return None
    return None


def _metric_rows_of(loaded: Any, path: str) -> list[MetricRow]:
    import pyarrow.parquet as pq

    with loaded.io.new_input(path).open(seekable=True) as stream:
        data = pq.read_table(stream, columns=["check", *HISTORY_COLUMNS])
    return [_metric_row(r) for r in data.to_pylist() if r["check"] == METRIC_CHECK]


def _metric_row(record: Mapping[str, Any]) -> MetricRow:
    return (record["load"], record["metric"], record["value"], _plain("recorded_at", record["recorded_at"]))


def _quoted(text: str) -> str:
    """A string literal of PyIceberg's filter syntax (metric names are validated: core.anomaly.parse_metric)."""
    return "'" + text.replace("'", "''") + "'"


def _plain(name: str, value: Any) -> Any:
    if name in _TIME and value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value
