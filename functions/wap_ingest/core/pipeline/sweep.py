"""The sweep of a table's leaked files (issue 33, item 5), run by `wap maintain` after the table's maintenance.

A file under the table's location is removed only when all of these hold:
- no live reference of the catalog needs it (core.lake_files: every branch and tag, every commit of each, every
  snapshot of every metadata file they name, of every table), from a reading begun after the sweep began;
- it was written more than the grace period before the sweep began (`SweepPolicy.grace_seconds`, longer than the
  longest run: a run in flight writes its files before it commits them, and a run that began before the cutoff has
  ended, its commits visible to the reading, by the time the sweep began);
- it lies inside the table's own location, and that location inside the warehouse;
- every file the live references need under that location is there (else the paths do not match the listing, or the
  table is damaged: nothing is removed).
Anything that cannot be read or listed (the catalog down, a metadata file missing) aborts the sweep of the table
before anything is removed: the report says so and why. What was removed goes to the report (the log, `wap maintain`'s
summary) and, as one record, to the decision log, which `wap history` shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from wap_ingest.core.errors import WapError
from wap_ingest.core.lake_files import FilesSwept, LakeFiles, Sorted, SweepPolicy, location_problem, sort_stored, under
from wap_ingest.core.models import DecisionRecord, TableRef
from wap_ingest.core.ports import DecisionLog

log = logging.getLogger(__name__)
SWEPT = "swept"  # the decision log's action for a sweep that removed files (`wap history`)


@dataclass(frozen=True)
class Sweep:
    """One `wap maintain` run's sweep: its rules, when it began (before any reading of the catalog), the ports."""

    files: LakeFiles
    policy: SweepPolicy
    started: datetime
    decisions: DecisionLog | None = None  # where removals are recorded (None: not recorded)
    actor: str = "wap maintain"
    now: Callable[[], datetime] = lambda: datetime.now(UTC)


def sweep_table(table: TableRef, sweep: Sweep, *, dry_run: bool = False) -> FilesSwept:
    """Sweep one table's location by the rules above; never raises a WapError (an abort is a report)."""
    grace = sweep.policy.grace_seconds

    def aborted(message: str) -> FilesSwept:
        log.warning("sweep of %s aborted: %s", table, message, extra={"table": table.qualified})
        return FilesSwept(table.qualified, "aborted", grace_seconds=grace, message=message)

    try:
        found = sweep.files.referenced(table, sweep.started)
    except WapError as exc:
        return aborted(f"{table}: the catalog's references could not be read, nothing was removed: {exc}")
    if found is None:
        return FilesSwept(table.qualified, "nothing to remove", grace_seconds=grace,
                          message=f"{table}: no reference of the catalog has it")
    problem = location_problem(table.qualified, found.locations, sweep.policy.warehouse)
    if problem:
        return aborted(problem)
    sorted_, seen, owner = Sorted(), set[str](), dict[str, str]()
    try:
        for location in found.locations:
            stop = sort_stored(found, location, sweep.files.stored(location), sweep.policy.cutoff(sweep.started),
                               sorted_, seen)
            if stop:
                return aborted(stop)
            owner |= {f.path: location for f in sorted_.removable if f.path not in owner}
    except WapError as exc:
        return aborted(f"{table}: its location could not be listed, nothing was removed: {exc}")
    removable = tuple(sorted(sorted_.removable, key=lambda f: f.path))
    status = "dry run" if dry_run else "removed" if removable else "nothing to remove"
    report = FilesSwept(table.qualified, status, removable, sorted_.listed, sorted_.referenced, sorted_.too_young,
                        grace)
    read = (f" (the catalog read: {found.references} reference(s), {found.commits} commit(s), "
            f"{found.metadata_files} metadata file(s))")
    if dry_run or not removable:
        return replace(report, message=f"{table}: {report.describe()}{read}")
    try:
        for location in found.locations:
            paths = [f.path for f in removable if owner[f.path] == location and under(f.path, location)]
            if paths:
                sweep.files.remove(location, paths)
    except WapError as exc:
        return aborted(f"{table}: removing its {len(removable)} unreferenced file(s) failed (some may be gone: none "
                       f"was in use): {exc}")
    report = replace(report, message=f"{table}: {report.describe()}{read}")
    log.info("%s", report.message, extra={"table": table.qualified, "swept": report.to_dict()})
    return _recorded(table, report, sweep)


def _recorded(table: TableRef, report: FilesSwept, sweep: Sweep) -> FilesSwept:
    if sweep.decisions is None:
        return report
    record = DecisionRecord(table.qualified, "", SWEPT, report.describe(), sweep.actor, sweep.now().isoformat())
    try:
        return replace(report, recorded_at=sweep.decisions.record(record))
    except WapError as exc:  # the files are gone all the same: say so, and that history will not show it
        log.warning("the sweep of %s is not recorded in the decision log: %s", table, exc)
        return replace(report, message=f"{report.message} (not recorded in the decision log: {exc})")
