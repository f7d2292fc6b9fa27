"""The WAP pipeline, defined once: route, dedupe, branch, write, audit, then publish or reject, and clean up.

Every entry point runs it (SQS batches, direct S3 and EventBridge events, `wap ingest`, `wap audit`'s dry run,
the EMR job). The files of one table are one group (a single file: a group of one): one branch, one write, one
audit per file, one merge. Each file keeps its own fate:
- DUPLICATE   the object version is already on main: nothing is written
- PUBLISHED   audited and merged into main (with `on_failure: quarantine`, its failing rows in <table>_quarantine)
- REJECTED    the audit failed: the file's branch stays open with its rows, the report is kept
- INVALID     the file (or its key) is unusable: nothing reaches main, no branch is left
A file of a larger group that fails its audit or cannot be written with the others runs again alone, so a
rejected branch holds only its own rows. Failures of the infrastructure are returned per file as the WapError
(the entry point retries them); any other exception while handling a group fails that group's files only."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from wap_ingest.core import ledger, lineage
from wap_ingest.core.audits import AuditSuite, AuditSuites, audit
from wap_ingest.core.branches import RunBranches, branch_name_for
from wap_ingest.core.errors import (
    BadInputError,
    BranchNotFoundError,
    EmptySourceError,
    EngineError,
    MergeConflictError,
    OutOfTimeError,
    OverBudgetError,
    WapError,
)
from wap_ingest.core.history import history_context
from wap_ingest.core.models import (
    AuditReport,
    Branch,
    IngestOutcome,
    Measurements,
    OutcomeStatus,
    Quarantined,
    SourceObject,
    TableRef,
)
from wap_ingest.core.outcomes import about, duplicate, invalid, quarantine_note, rejected
from wap_ingest.core.routing import Routed, route
from wap_ingest.core.stopwatch import Stopwatch

from .base import RETRY_FROM_MAIN, PipelineConfig, Ports, Result, retry_delay, unexpected

log = logging.getLogger(__name__)



def run_wap(
    sources: Sequence[SourceObject],
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    table: TableRef | None = None,
    dry_run: bool = False,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[Result]:
    """One result per source, in order. `table` overrides the routing by key; `dry_run` audits on a throw-away
    branch and publishes nothing (`wap audit`)."""
    results: dict[int, Result] = {}
    routed: list[tuple[int, Routed]] = []
    for index, source in enumerate(sources):
        found = route_or_result(source, ports=ports, suites=suites, config=config, table=table)
        if isinstance(found, Routed):
            routed.append((index, found))
        else:
            results[index] = found
    for (index, _), result in zip(routed, run_routed([r for _, r in routed], ports=ports, suites=suites,
                                                     config=config, dry_run=dry_run, out_of_time=out_of_time),
                                  strict=True):
        results[index] = result
    return [results[i] for i in range(len(sources))]


def route_or_result(
    source: SourceObject, *, ports: Ports, suites: AuditSuites, config: PipelineConfig, table: TableRef | None = None
) -> Routed | Result:
    """Route one object; a refusal is its INVALID outcome, any other failure its error."""
    started = time.perf_counter()
    try:
        routed = route(source, objects=ports.objects, suites=suites, default_namespace=config.default_namespace,
                     source_buckets=config.source_buckets, refused_buckets=config.refused_buckets,
                     table=table)
        return replace(routed, seconds=time.perf_counter() - started)
    except BadInputError as exc:
        return replace(invalid(source, exc, table), timings={"route": time.perf_counter() - started})
    except WapError as exc:
        return exc
    except Exception as exc:
        return unexpected(f"routing {source.uri}", exc)


def run_routed(
    routed: Sequence[Routed],
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    dry_run: bool = False,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[Result]:
    """Group by table and run each group; `out_of_time` is asked before each group starts (the files not
    started are deferred, never cut off mid-merge)."""
    run = _Run(ports, suites, config, dry_run)
    groups: dict[TableRef, list[tuple[int, Routed]]] = {}
    for index, item in enumerate(routed):
        groups.setdefault(item.table, []).append((index, item))
    for target, items in groups.items():
        # "unique against main": each file must see the files published before it, so they go one by one
        alone = dry_run or bool(suites.suite_for(target).plan().existing_keys)
        for group in ([[i] for i in items] if alone else _chunks(items, config.staging_budget_bytes)):
            if out_of_time():
                run.settle_all(group, lambda r: OutOfTimeError(
                    f"{r.source.uri}: not started, the invocation is nearly out of time; back to the queue."))
            elif not _fits(group, config):
                run.settle_all(group, lambda r: OverBudgetError(
                    f"{r.source.uri}: not started, staging it now would exceed the free local disk; back to the "
                    f"queue (it runs in a later invocation)."))
            else:
                run.group(target, group)
    return [run.settled[i] for i in range(len(routed))]


def _chunks(items: list[tuple[int, Routed]], budget: int | None) -> list[list[tuple[int, Routed]]]:
    """Consecutive chunks whose sizes add up to at most `budget` (a file larger than it is a chunk of its own)."""
    chunks: list[list[tuple[int, Routed]]] = [[]]
    total = 0
    for item in items:
        size = item[1].source.size or 0
        if chunks[-1] and budget is not None and total + size > budget:
            chunks.append([])
            total = 0
        chunks[-1].append(item)
        total += size
    return chunks


def _fits(group: list[tuple[int, Routed]], config: PipelineConfig) -> bool:
    """Staged files, and the engine's scratch for them, must fit the free disk (twice the files' bytes)."""
    if config.free_bytes is None:
        return True
    return 2 * sum(r.source.size or 0 for _, r in group) <= config.free_bytes()


class _Run:
    """One call's groups and the results they settled (by the index of the routed object)."""

    def __init__(self, ports: Ports, suites: AuditSuites, config: PipelineConfig, dry_run: bool) -> None:
        self.ports, self.suites, self.config, self.dry_run = ports, suites, config, dry_run
        self.settled: dict[int, Result] = {}
        self.quarantined: dict[str, Quarantined] = {}  # by source identity: rows a quarantine set aside
        self.branches = RunBranches(ports.catalog, clock=config.clock, abandoned_after=config.abandoned_after_seconds)

    def settle_all(self, group: list[tuple[int, Routed]], error: Callable[[Routed], WapError]) -> None:
        for index, item in group:
            self.settled.setdefault(index, error(item))

    def fail_all(self, group: list[tuple[int, Routed]], error: WapError) -> None:
        """The group's files not settled yet fail with `error` (their messages are retried); the others keep theirs."""
        for index, _ in group:
            self.settled.setdefault(index, error)

    def group(self, target: TableRef, group: list[tuple[int, Routed]]) -> None:
        """The retry loop: a conflict restarts the group from main (never a forced merge); any other failure
        fails the group's unsettled files, and only them."""
        pending = self._once(target, group)
        later: list[list[tuple[int, Routed]]] = []
        watch = Stopwatch()  # the outcomes' `timings`: seconds per stage, summed over retries
        for attempt in range(1, self.config.merge_attempts + 1):
            try:
                later = self._attempt(target, pending, attempt, watch)
                break
            except RETRY_FROM_MAIN as exc:
                if attempt == self.config.merge_attempts:
                    self.fail_all(pending, exc)
                    return
                delay = retry_delay(attempt, self.config)
                log.info("%s: conflict (attempt %d), retrying from main in %.2fs: %s", target, attempt, delay, exc)
                self.config.sleep(delay)
                pending = [(i, r) for i, r in pending if i not in self.settled]
            except WapError as exc:
                log.warning("%s: %d file(s) failed: %s", target, len(pending), exc)
                self.fail_all(pending, exc)
                return
            except Exception as exc:
                self.fail_all(pending, unexpected(f"ingesting into {target}", exc))
                return
        for index, item in group:
            found = self.settled.get(index)
            if isinstance(found, IngestOutcome) and not found.timings:
                self.settled[index] = replace(found, timings={"route": item.seconds} | watch.laps())
        for part in later:  # unwritable together, or failed the audit: again, apart from the others
            self.group(target, part)

    def _once(self, target: TableRef, group: list[tuple[int, Routed]]) -> list[tuple[int, Routed]]:
        """The same version announced twice in one delivery is handled once."""
        seen: dict[str, Routed] = {}
        pending = []
        for index, item in group:
            if item.source.identity in seen:
                self.settled[index] = IngestOutcome(
                    source=item.source, status=OutcomeStatus.DUPLICATE, table=target.qualified,
                    message=f"{item.source.uri} was delivered twice in this batch; it is handled once")
            else:
                seen[item.source.identity] = item
                pending.append((index, item))
        return pending

    def _attempt(
        self, target: TableRef, pending: list[tuple[int, Routed]], attempt: int, watch: Stopwatch
    ) -> list[list[tuple[int, Routed]]]:
        """One try: dedupe, branch, write, audit, then publish or reject. Returns the parts to run apart."""
        catalog, main = self.ports.catalog, self.config.main_branch
        with watch.stage("branch"):
            main_hash = catalog.ensure_namespace(main, target.namespace)
            if not self.dry_run:  # the ledger on main, by key (a concurrent publication conflicts at the merge)
                published = catalog.find_published(main, target, [r.source.identity for _, r in pending])
                done = [(i, r) for i, r in pending if r.source.identity in published]
                note = self.branches.clean_up(target, [r.source for _, r in done]) if done else ""
                for index, item in done:  # on main already; its left-over attempts are gone now
                    self.settled[index] = duplicate(item.source, target, published[item.source.identity], note)
            todo = [(i, r) for i, r in pending if i not in self.settled]
            if not todo:
                return []
            name = branch_name_for(target, [r.source for _, r in todo], attempt, dry_run=self.dry_run,
                                   now=self.config.clock())
            branch = catalog.create_branch(name, main_hash)
        suite = self.suites.suite_for(target)
        try:
            written, reports = self._write_and_audit(target, todo, branch, suite, watch)
        except BadInputError as exc:  # a lone file is the problem: nothing to review, no branch left
            (index, item), = todo
            self.settled[index] = invalid(item.source, exc, target, note=self.branches.discard(branch.name))
            return []
        except WapError as exc:
            if self.branches.vanished(branch.name):  # a concurrent duplicate delivery published it meanwhile
                raise BranchNotFoundError(f"branch {branch.name!r} was deleted during the run: {exc}") from exc
            note = self.branches.discard(branch.name)
            if not note:
                raise
            raise type(exc)(f"{exc}{note}") from exc
        except Exception:  # an unexpected error: nothing of this attempt stays behind (a crash is the next run's)
            self.branches.discard(branch.name)
            raise
        measured, snapshot_rows, in_snapshot, left_out = written
        if len(todo) > 1:
            bad = [(i, r) for i, r in todo if r.source.identity in left_out or not _passes(
                reports.get(r.source.identity), measured.get(r.source.identity))]
            good = [(i, r) for i, r in todo if (i, r) not in bad]
            if bad and any(r.source.identity in in_snapshot for _, r in bad):  # written with the rest: redo apart
                self.branches.discard(branch.name)
                return ([good] if good else []) + [[b] for b in bad]
            if not good:
                self.branches.discard(branch.name)
                return [[b] for b in bad]
            todo = good
        else:
            bad = []
        rows = {r.source.identity: measured[r.source.identity].row_count for _, r in todo}
        if snapshot_rows != sum(rows.values()):  # what is merged is exactly what was audited, or nothing
            self.branches.discard(branch.name)
            raise EngineError(f"{target} on {branch.name!r}: the snapshot holds {snapshot_rows} rows but the audited "
                              f"files hold {sum(rows.values())}; nothing was published.")
        if len(todo) == 1 and snapshot_rows == 0:
            (index, item), = todo
            self.settled[index] = invalid(item.source, EmptySourceError(
                f"{item.source.uri}: the file has a header/schema but no rows; nothing to ingest into {target}. "
                f"Fix: upload a file with data."), target, note=self.branches.discard(branch.name))
            return []
        if self.dry_run or not all(reports[r.source.identity].passed for _, r in todo):
            self._keep_or_discard(target, todo[0], branch, rows, reports)
            return [[b] for b in bad]
        with watch.stage("merge"):
            self._publish(target, todo, branch, rows, reports, main_hash, attempt)
        return [[b] for b in bad]

    def _write_and_audit(
        self, target: TableRef, todo: list[tuple[int, Routed]], branch: Branch, suite: AuditSuite, watch: Stopwatch
    ) -> tuple[tuple[dict[str, Measurements], int, set[str], dict[str, str]], dict[str, AuditReport]]:
        context = history_context(suite, target, self.ports.catalog, self.config.main_branch)  # once per group

        def keep(source: SourceObject, measured: Measurements) -> bool:  # an engine that audits before writing
            return measured.row_count > 0 and audit(suite, target, measured, context).passed

        with watch.stage("append"):
            log.info("writing %d file(s) into %s on branch %s", len(todo), target, branch.name)
            appended = self.ports.writer.append(
                [(r.source, r.fmt) for _, r in todo], target, branch.name, suite.plan(),
                keep=keep if len(todo) > 1 else None, allow_new_columns=suite.allow_new_columns,
                read_options=suite.format_options,  # a file of a batch that fails runs alone, then quarantines
                quarantine=suite.quarantine_plan(target) if len(todo) == 1 else None, layout=suite.layout,
                keep_snapshots=suite.maintenance.keep_snapshots)
            self.quarantined.update(appended.quarantined)
        with watch.stage("audit"):
            reports = {identity: audit(suite, target, m, context) for identity, m in appended.measured.items()}
        snapshot_rows = appended.snapshot.rows if appended.snapshot is not None else 0
        return (dict(appended.measured), snapshot_rows, {s.identity for s in appended.written},
                dict(appended.left_out)), reports

    def _keep_or_discard(
        self, target: TableRef, item: tuple[int, Routed], branch: Branch, rows: dict[str, int],
        reports: dict[str, AuditReport],
    ) -> None:
        """A dry run deletes its branch; a rejected file keeps it (one open branch per object version)."""
        index, routed = item
        source, report = routed.source, reports[routed.source.identity]
        if self.dry_run:
            note = self.branches.discard(branch.name)
            status = OutcomeStatus.AUDITED if report.passed else OutcomeStatus.REJECTED
            self.settled[index] = IngestOutcome(
                source=source, status=status, table=target.qualified, rows=rows[source.identity], report=report,
                message="dry run: the file would be " + ("published" if report.passed else "rejected")
                + f"; nothing was published{note}")
            return
        self.branches.clean_up(target, [source], keep=branch.name)
        self.settled[index] = rejected(source, target, branch.name, rows[source.identity], report, self.ports.reports,
                                       self.quarantined.get(source.identity))

    def _publish(
        self, target: TableRef, todo: list[tuple[int, Routed]], branch: Branch, rows: dict[str, int],
        reports: dict[str, AuditReport], main_hash: str, attempt: int,
    ) -> None:
        catalog = self.ports.catalog
        loaded = [(r.source, rows[r.source.identity]) for _, r in todo]
        # the ledger's entries on the branch: merged with the rows, in the same atomic merge
        head = catalog.record_published(branch.name, ledger.entries_for(target, loaded, branch.name,
                                                                        self.config.clock()))
        what = todo[0][1].source.uri if len(todo) == 1 else f"{len(todo)} files"
        try:
            merged = catalog.merge(head, self.config.main_branch, main_hash,
                                   message=f"wap: publish {what} into {target} ({sum(rows.values())} rows)",
                                   properties=lineage.merge_properties(target, loaded) | lineage.quarantine_properties(
                                       self.quarantined.get(todo[0][1].source.identity) if len(todo) == 1 else None))
        except MergeConflictError:
            self.branches.discard(branch.name)  # another file for this table was published first: redo from main
            raise
        note = self.branches.clean_up(target, [s for s, _ in loaded], extra=branch.name)
        for index, item in todo:
            n, quarantined = rows[item.source.identity], self.quarantined.get(item.source.identity)
            log.info("published %s into %s (%d rows)", item.source.uri, target, n,
                     extra=about(item.source, target, branch.name))
            self.settled[index] = IngestOutcome(
                source=item.source, status=OutcomeStatus.PUBLISHED, table=target.qualified, branch=branch.name,
                rows=n, report=reports[item.source.identity], merged_hash=merged, attempts=attempt,
                quarantined=quarantined, message=f"published {n} rows into {target}" + (
                    f" (one merge for {len(todo)} files)" if len(todo) > 1 else "")
                + quarantine_note(quarantined, item.source) + note)


def _passes(report: AuditReport | None, measured: Measurements | None) -> bool:
    return report is not None and measured is not None and report.passed and measured.row_count > 0
