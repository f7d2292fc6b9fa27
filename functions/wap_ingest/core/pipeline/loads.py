"""Multi-table atomic loads (issue 16, item 2): several files, several tables, one merge or none.

Objects under the top-level prefix `_pending/` are not ingested by their own notifications (WAITING). A manifest
`_loads/<name>.json` in a source bucket, `{"files": ["_pending/<table>/<file>", {"key": ..., "table": ...}, ...]}`
(keys in the manifest's own bucket; a file's table is the prefix after `_pending/` unless the entry names one), starts
one WAP run for the whole set: one branch, each file appended to its table and audited with its table's suite, then
one merge for every table, or, if any file fails, none: the branch keeps everything, its report is stored, and one
alert lists each file's result. A load keeps every rule a lone file keeps: its tables are routed as keys are (never a
table the service owns; `strict_tables`), each file is quarantined as its table says, the guards are checked before
each file is staged, and the transaction (transaction.py) branches, records one ledger entry per file (also when a
kept load is published after review), merges, retries from a fresh `main` and cleans up. Exactly once by each file's
identity (every file on `main` already: DUPLICATE); a merge conflict redoes the whole load from `main`.
The manifest is read in core/manifests.py and its files routed, with every other object, by core/routing.py (which
also says whether the load runs here or on EMR); this module runs the routed load.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from wap_ingest.core import lineage
from wap_ingest.core.audits import AuditSuites, audit
from wap_ingest.core.branches import RunKind
from wap_ingest.core.errors import BadInputError, EmptySourceError, WapError
from wap_ingest.core.history import history_beside
from wap_ingest.core.ledger import LedgerEntry
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import (
    AuditReport,
    Branch,
    IngestOutcome,
    OutcomeStatus,
    Quarantined,
    SourceObject,
    TableRef,
)
from wap_ingest.core.outcomes import invalid, quarantine_note
from wap_ingest.core.routing import Routed
from wap_ingest.core.write_paths import WritePath

from .base import PipelineConfig, Ports, bound_snapshots, record_results, results_tables, router_for, spec_for
from .transaction import Ended, Guards, Keep, Loaded, Merge, Publish, Transactions, Verdict, Work

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Part:
    routed: Routed
    rows: int
    report: AuditReport
    measured: Measurements
    quarantined: Quarantined | None = None
    write: WritePath | None = None  # how the engine took the file in (registered or rewritten), and why


class Load:
    """One manifest's run. `run` returns its outcome (the files' own outcomes in `parts`) or the error to retry."""

    def __init__(self, ports: Ports, suites: AuditSuites, config: PipelineConfig,
                 out_of_time: Callable[[], bool] = lambda: False) -> None:
        self.ports, self.suites, self.config = ports, suites, config
        self.transactions = Transactions(ports.catalog, config, Guards(out_of_time, config.free_bytes))

    def run(self, manifest: SourceObject) -> IngestOutcome | WapError:
        """The manifest routed here (core.routing: its files, each routed), then run."""
        placed = router_for(self.ports, self.suites, self.config).place_load(manifest)
        if placed.routed is None:
            assert placed.result is not None  # refused: INVALID, or the error to retry
            return placed.result
        return self.run_prepared(placed.routed.source, list(placed.files))

    def run_prepared(self, head: SourceObject, routed: list[Routed]) -> IngestOutcome | WapError:
        work = _LoadWork(self, head, routed)
        try:
            ended = self.transactions.run(work)
        except BadInputError as exc:
            return invalid(head, exc)
        except WapError as exc:
            return exc
        return work.outcome(ended)


class _LoadWork(Work):
    """A load as the transaction's work: every file written to its table and audited on one branch."""

    kind = RunKind.LOAD

    def __init__(self, load: Load, manifest: SourceObject, routed: list[Routed]) -> None:
        self.load, self.manifest, self.routed = load, manifest, routed
        self.parts: list[_Part] = []
        self.duplicate: IngestOutcome | None = None

    def tables(self) -> Sequence[TableRef]:
        return sorted({r.table for r in self.routed}, key=lambda t: t.qualified)

    def results(self) -> Sequence[TableRef]:
        return results_tables(self.load.ports, self.tables())

    def about(self) -> str:
        return self.manifest.identity

    def versions(self) -> Mapping[TableRef, Sequence[SourceObject]]:
        found: dict[TableRef, list[SourceObject]] = {}
        for item in self.routed:
            found.setdefault(item.table, []).append(item.source)
        return found

    def on_main(self, found: Mapping[str, LedgerEntry], note: str) -> bool:
        if len(found) < len(self.routed):
            listed = ", ".join(r.source.uri for r in self.routed if r.source.identity in found)
            raise BadInputError(
                f"{self.manifest.uri}: {len(found)} of its {len(self.routed)} files are on main already ({listed}), "
                f"published apart from this load; a load publishes all its files together or none. Fix: remove them "
                f"from the manifest and upload it again.")
        self.duplicate = IngestOutcome(
            source=self.manifest, status=OutcomeStatus.DUPLICATE, table=_names(r.table for r in self.routed),
            rows=sum(e.rows for e in found.values()), message=f"every file of the load {self.manifest.uri} is on "
            f"main already; nothing to do{note}")
        return True

    def run(self, branch: Branch, attempt: int) -> Verdict:
        try:
            order = referenced_first(self.routed, self.load.suites)
            done = {id(r): self._write(r, branch.name) for r in order}
            self.parts = [done[id(r)] for r in self.routed]
        except BadInputError as exc:
            raise BadInputError(f"{exc} (in the load {self.manifest.uri}; nothing of it was published)") from exc
        files = [(p.routed.source, p.routed.table, p.rows) for p in self.parts]
        moved = {p.routed.source.identity: p.quarantined for p in self.parts if p.quarantined is not None}
        written = {p.routed.source.identity: p.write for p in self.parts if p.write is not None}
        total = sum(p.rows for p in self.parts)
        for table in self.tables():
            record_results(self.load.ports, self.load.config, table, branch.name, [
                (p.routed.source, p.report, p.measured) for p in self.parts if p.routed.table == table])
        merge = Merge(tuple(Loaded.of(t, s, n) for s, t, n in files),
                      f"wap: load {self.manifest.uri} into {_names(self.tables())} ({total} rows)",
                      lineage.load_properties(self.manifest, files, moved, written))
        return Publish(merge) if all(p.report.passed for p in self.parts) else Keep(merge)

    def _write(self, item: Routed, branch: str) -> _Part:
        load = self.load
        suite = load.suites.suite_for(item.table)
        what, guards = f"{item.source.uri} of the load {self.manifest.uri}", load.transactions.guards
        if item is not self.routed[0]:  # the first file's time was checked as the attempt started
            guards.check_time(what)
        guards.check_disk(what, item.local_bytes)
        spec = spec_for(suite, item.table, branch, alone=True, out_of_time=guards.out_of_time)
        context = history_beside(suite, item.table, load.ports.catalog, load.config.main_branch, load.ports.results)
        appended = load.ports.writer.append(spec, item.source, item.fmt)
        measured = appended.measured[item.source.identity]
        if appended.snapshot is None or measured.row_count == 0:
            raise EmptySourceError(f"{item.source.uri}: the file has no rows; nothing to ingest into {item.table}. "
                                   f"Fix: upload it with data, then the manifest again.")
        bound_snapshots(load.ports, suite, item.table, branch, appended.snapshot.snapshots)
        return _Part(item, measured.row_count, audit(suite, item.table, measured, context()), measured,
                     appended.quarantined.get(item.source.identity), appended.write.get(item.source.identity))

    def outcome(self, ended: Ended) -> IngestOutcome:
        if ended.status == "on main":
            assert self.duplicate is not None
            return self.duplicate
        if ended.status == "kept":
            return self._rejected(str(ended.branch), ended.note)
        tables, total = _names(self.tables()), sum(p.rows for p in self.parts)
        log.info("published the load %s: %d files, %d rows into %s", self.manifest.uri, len(self.parts), total, tables)
        outcomes = tuple(IngestOutcome(source=p.routed.source, status=OutcomeStatus.PUBLISHED,
                                       table=p.routed.table.qualified, branch=ended.branch, rows=p.rows,
                                       report=p.report, merged_hash=ended.merged_hash, quarantined=p.quarantined,
                                       message=((f"; {p.write}" if p.write else "") + quarantine_note(
                                           p.quarantined, p.routed.source)).removeprefix("; "))
                         for p in self.parts)
        return IngestOutcome(source=self.manifest, status=OutcomeStatus.PUBLISHED, table=tables,
                             branch=ended.branch, rows=total, merged_hash=ended.merged_hash, attempts=ended.attempts,
                             parts=outcomes, message=f"published the load of {len(self.parts)} files into {tables} "
                             f"in one merge ({total} rows){ended.note}")

    def _rejected(self, branch: str, note: str) -> IngestOutcome:
        parts = self.parts
        outcomes = tuple(IngestOutcome(
            source=p.routed.source, status=OutcomeStatus.PUBLISHED if p.report.passed else OutcomeStatus.REJECTED,
            table=p.routed.table.qualified, branch=branch, rows=p.rows, report=p.report, quarantined=p.quarantined)
            for p in parts)
        failed = "; ".join(f"{p.routed.source.uri} into {p.routed.table}: " + ", ".join(
            f"{c.check}({c.target}) {c.measured}" for c in p.report.failures) for p in parts if not p.report.passed)
        outcome = IngestOutcome(
            source=self.manifest, status=OutcomeStatus.REJECTED, table=_names(p.routed.table for p in parts),
            branch=branch, rows=sum(p.rows for p in parts), parts=outcomes,
            message=f"the load was not published (no table changed): {failed}. Every file waits on branch "
            f"{branch!r}.{note}")
        reports = self.load.ports.reports
        if reports is not None:
            try:
                kept = reports.save(branch, outcome.to_dict())
                outcome = replace(outcome, message=f"{outcome.message} Report: {kept}.")
            except WapError as exc:
                log.warning("could not keep the report of the load %s: %s", self.manifest.uri, exc)
        log.warning("load %s rejected: %s", self.manifest.uri, failed)
        return outcome


def referenced_first(routed: Sequence[Routed], suites: AuditSuites) -> list[Routed]:
    """The load's files in the order they are written: a table another file's `references` or `reconcile` check reads
    comes before that file's (so a key and the rows that point to it, or lines and their header, may arrive in one
    load), the manifest's order otherwise (and where the reads go round in a circle)."""
    tables = {r.table for r in routed}
    reads = {t: {TableRef(*other.split(".", 1)) for other in _reads(suites.suite_for(t).plan())} & tables
             for t in tables}

    def rank(table: TableRef, seen: frozenset[TableRef] = frozenset()) -> int:
        readers = [u for u in tables if table in reads[u] and u not in seen and u != table]
        return max((rank(u, seen | {table}) + 1 for u in readers), default=0)

    ranks = {t: rank(t) for t in tables}
    return sorted(routed, key=lambda r: -ranks[r.table])


def _names(tables: Iterable[TableRef]) -> str:
    return ", ".join(sorted({t.qualified for t in tables}))


def _reads(plan: MeasurementPlan) -> list[str]:
    """The other tables a table's checks read (qualified)."""
    return [r.table for r in plan.references] + [r.table for r in plan.reconciliations]
