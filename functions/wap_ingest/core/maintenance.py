"""Keeping a table healthy (issue 15): when it needs compaction, a manifest rewrite or a shorter snapshot list, from
its `maintenance:` settings in the audits file; what `wap maintain` did, for the logs, the metrics and `wap history`.

    maintenance:
      min_input_files: 5       # compact when at least this many small data files (per partition) exist
      small_file_mb: 32        # a data file under this size is small
      max_manifests: 20        # rewrite the manifests when the current snapshot has more
      keep_snapshots: 50       # the current metadata keeps this many newest snapshots (the rest stay in Nessie's
                               # history); an ingestion trims it when it lists more than twice as many
      emr_above_mb: 10240      # a table larger than this is maintained by an EMR Serverless job (0: every table)

On Nessie, removing a snapshot from a table's current metadata deletes no file: the older metadata stays reachable
from Nessie's commit history, and other branches share the files. The maintenance itself deletes no file; after it,
`wap maintain` sweeps the table's location for the files that no commit of any reference uses (the leftovers of
discarded, pruned and conflicting runs, core.lake_files); what older commits alone use is Nessie GC's (README:
"Keeping tables healthy").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from .errors import AuditSuiteError
from .lake_files import FilesSwept

MB = 1024 * 1024
KEYS = ("min_input_files", "small_file_mb", "max_manifests", "keep_snapshots", "emr_above_mb")
MAINTENANCE = "wap.maintenance"  # on the merge commit of a maintenance: what it did (JSON)


@dataclass(frozen=True)
class MaintenanceSettings:
    min_input_files: int = 5
    small_file_mb: int = 32
    max_manifests: int = 20
    keep_snapshots: int = 50
    emr_above_mb: int = 10240


DEFAULT_MAINTENANCE = MaintenanceSettings()
_LIMITS = {"min_input_files": (2, 100_000), "small_file_mb": (1, 4096), "max_manifests": (1, 100_000),
           "keep_snapshots": (2, 100_000), "emr_above_mb": (0, 10_000_000)}


def maintenance_from(raw: object, table: str) -> MaintenanceSettings:
    where = f"audits file: table {table!r}: maintenance"
    if not isinstance(raw, Mapping):
        raise AuditSuiteError(f"{where} must be a mapping with {', '.join(KEYS)}, got {raw!r}.")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise AuditSuiteError(f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(KEYS)}.")
    values: dict[str, int] = {}
    for key, value in raw.items():
        low, high = _LIMITS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise AuditSuiteError(f"{where}: {key} must be a whole number from {low} to {high}, got {value!r}.")
        values[str(key)] = value
    return MaintenanceSettings(**values)


@dataclass(frozen=True)
class TableHealth:
    """A table's state on one reference, from its metadata."""

    rows: int = 0
    data_files: int = 0
    data_bytes: int = 0
    small_files: int = 0
    manifests: int = 0
    snapshots: int = 0


@dataclass(frozen=True)
class MaintenanceWork:
    compact: bool = False
    rewrite_manifests: bool = False
    remove_snapshots: int = 0  # the oldest snapshots dropped from the current metadata

    def __bool__(self) -> bool:
        return self.compact or self.rewrite_manifests or self.remove_snapshots > 0

    def describe(self) -> str:
        parts = (["compact the small data files"] if self.compact else []) + (
            ["rewrite the manifests"] if self.rewrite_manifests else []) + (
            [f"drop the {self.remove_snapshots} oldest snapshot(s) from the current metadata"]
            if self.remove_snapshots else [])
        return "; ".join(parts) or "nothing"


def work_for(health: TableHealth, settings: MaintenanceSettings) -> MaintenanceWork:
    """What the table needs now, by its settings' thresholds."""
    return MaintenanceWork(
        compact=health.small_files >= settings.min_input_files,
        rewrite_manifests=health.manifests > settings.max_manifests,
        remove_snapshots=max(0, health.snapshots - settings.keep_snapshots),
    )


@dataclass(frozen=True)
class MaintenanceReport:
    table: str
    status: str  # "maintained", "nothing to do", "dry run", "sent to EMR"
    work: MaintenanceWork
    before: TableHealth
    after: TableHealth | None = None
    attempts: int = 0
    merged_hash: str | None = None
    job_run: str | None = None
    message: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    swept: FilesSwept | None = None  # the sweep of the table's unreferenced files (None: not swept by this run)

    def to_dict(self) -> dict[str, object]:
        return {"table": self.table, "status": self.status, "work": asdict(self.work), "before": asdict(self.before),
                "after": asdict(self.after) if self.after else None, "attempts": self.attempts,
                "merged_hash": self.merged_hash, "job_run": self.job_run, "message": self.message,
                "timings": self.timings, "swept": self.swept.to_dict() if self.swept else None}

    def commit_summary(self) -> str:
        """What the merge commit carries (MAINTENANCE), compact JSON."""
        return json.dumps({"work": self.work.describe(), "before": asdict(self.before),
                           "after": asdict(self.after) if self.after else None}, separators=(",", ":"))


def summary_line(properties: Mapping[str, str]) -> str | None:
    """`wap history`'s line for a maintenance merge: files and bytes before and after; None for other commits."""
    raw = properties.get(MAINTENANCE)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        before, after = data["before"], data["after"] or data["before"]
        return (f"{data['work']}: {before['data_files']} -> {after['data_files']} data files, "
                f"{before['data_bytes']} -> {after['data_bytes']} bytes, {before['manifests']} -> "
                f"{after['manifests']} manifests, {before['snapshots']} -> {after['snapshots']} snapshots")
    except (ValueError, KeyError, TypeError):
        return "maintenance (summary unreadable)"
