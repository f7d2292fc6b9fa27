"""The WAP pipeline, defined once: route, dedupe, branch, write, audit, then publish or reject, and clean up.

Every entry point runs it (SQS batches, direct S3 and EventBridge events, `wap ingest`, `wap audit`'s dry run,
the EMR job). The files of one table are one group (a single file: a group of one): one branch, one write, one
audit per file, one merge. Each file keeps its own fate:
- DUPLICATE   the object version is already on main: nothing is written
- PUBLISHED   audited and merged into main (with `on_failure: quarantine`, its failing rows in <table>_quarantine)
- REJECTED    the audit failed: the file's branch stays open with its rows, the report is kept
- INVALID     the file (or its key) is unusable: nothing reaches main, no branch is left
A file of a larger group that fails its audit or cannot be read with the others runs again alone, so a rejected
branch holds only its own rows. Failures of the infrastructure are returned per file as the WapError (the entry
point retries them); any other exception while handling a group fails that group's files only. The branch, the
ledger, the merge, the retries from main and the clean-up are the transaction's (transaction.py): this module
supplies the work and the verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from wap_ingest.core import lineage
from wap_ingest.core.audits import AuditContext, AuditSuite, AuditSuites, audit
from wap_ingest.core.branches import RunKind, group_identity
from wap_ingest.core.errors import BadInputError, EmptySourceError, EngineError, WapError
from wap_ingest.core.history import history_beside
from wap_ingest.core.ledger import LedgerEntry
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import (
    Appended,
    AuditReport,
    Branch,
    IngestOutcome,
    OutcomeStatus,
    Quarantined,
    SourceObject,
    TableRef,
)
from wap_ingest.core.outcomes import about, duplicate, invalid, quarantine_note, rejected
from wap_ingest.core.ports import WriteSpec
from wap_ingest.core.routing import Routed
from wap_ingest.core.stopwatch import Stopwatch
from wap_ingest.core.write_paths import WritePath

from .base import (
    PipelineConfig,
    Ports,
    Result,
    bound_snapshots,
    record_results,
    results_tables,
    router_for,
    spec_for,
    unexpected,
)
from .beside import ResultsBeside
from .transaction import Discard, Ended, Guards, Keep, Loaded, Merge, Publish, Transactions, Verdict, Work

log = logging.getLogger(__name__)

Item = tuple[int, Routed]  # a routed object and its index in the call


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
    """One result per source, in order, every one run here (core.routing: a refused one is its result; a load's file
    or manifest is refused alone). `table` overrides the routing by key; `dry_run` audits on a throw-away branch and
    publishes nothing (`wap audit`)."""
    router = router_for(ports, suites, config)
    results: dict[int, Result] = {}
    routed: list[Item] = []
    for index, source in enumerate(sources):
        placed = router.place(source, table, loads=False)
        if placed.routed is not None:
            routed.append((index, placed.routed))
        else:
            assert placed.result is not None
            results[index] = placed.result
    for (index, _), result in zip(routed, run_routed([r for _, r in routed], ports=ports, suites=suites,
                                                     config=config, dry_run=dry_run, out_of_time=out_of_time),
                                  strict=True):
        results[index] = result
    return [results[i] for i in range(len(sources))]


def run_routed(
    routed: Sequence[Routed],
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    dry_run: bool = False,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[Result]:
    """Group by table and run each group; the guards (time left, disk) are checked before each attempt and before
    files are staged (the files not started are deferred, never cut off mid-merge)."""
    run = _Run(ports, suites, config, dry_run, Transactions(ports.catalog, config, Guards(out_of_time,
                                                                                           config.free_bytes)))
    groups: dict[TableRef, list[Item]] = {}
    for index, item in enumerate(routed):
        groups.setdefault(item.table, []).append((index, item))
    if groups:  # meanwhile: the ledger lookups and the branch of the first group
        lone = {t: _alone(suites.suite_for(t), dry_run) or len(items) == 1 for t, items in groups.items()}
        ports.writer.start([(spec_for(suites.suite_for(t), t, "", alone=True), item.fmt)
                            for t, items in groups.items() if lone[t] for _, item in items],
                           together=not all(lone.values()))
    for target, items in groups.items():
        # "unique against main", "references" and "reconcile": each file must see the files published before it, so
        # they go one by one; a table that registers every file (write: register) takes each on its own (files read
        # together are rewritten)
        suite = suites.suite_for(target)
        alone = _alone(suite, dry_run)
        for group in ([[i] for i in items] if alone else _chunks(items, config.staging_budget_bytes)):
            run.group(target, group)
    return [run.settled[i] for i in range(len(routed))]


def _alone(suite: AuditSuite, dry_run: bool) -> bool:
    """Whether a table's files each run alone (else consecutive files are read together, within the budget)."""
    plan = suite.plan()
    return dry_run or bool(plan.existing_keys or plan.references or plan.reconciliations) or suite.write == "register"


def _chunks(items: list[Item], budget: int | None) -> list[list[Item]]:
    """Consecutive chunks whose processed bytes add up to at most `budget` (a file larger than it is a chunk of its
    own)."""
    chunks: list[list[Item]] = [[]]
    total = 0
    for item in items:
        size = item[1].processed
        if chunks[-1] and budget is not None and total + size > budget:
            chunks.append([])
            total = 0
        chunks[-1].append(item)
        total += size
    return chunks


class _Run:
    """One call's groups and the results they settled (by the index of the routed object)."""

    def __init__(self, ports: Ports, suites: AuditSuites, config: PipelineConfig, dry_run: bool,
                 transactions: Transactions) -> None:
        self.ports, self.suites, self.config, self.dry_run = ports, suites, config, dry_run
        self.transactions = transactions
        self.settled: dict[int, Result] = {}

    def group(self, target: TableRef, group: list[Item]) -> None:
        """One transaction for the group; any failure fails the group's unsettled files, and only them."""
        watch = Stopwatch()  # the outcomes' `timings`: seconds per stage, summed over retries
        work = _GroupWork(self, target, self._once(target, group), watch)
        try:
            ended = self.transactions.run(work, watch)
        except BadInputError as exc:
            if len(work.todo) == 1:  # a lone file is the problem: nothing to review, no branch left
                (index, item), = work.todo
                self.settled[index] = invalid(item.source, exc, target)
            else:  # pragma: no cover (a group reports its unreadable files; it never raises for them)
                self._fail(work.todo, unexpected(f"ingesting into {target}", exc))
            return
        except WapError as exc:
            log.warning("%s: %d file(s) failed: %s", target, len(work.todo), exc)
            self._fail(work.todo, exc)
            return
        except Exception as exc:
            self._fail(work.todo, unexpected(f"ingesting into {target}", exc))
            return
        work.settle(ended)
        for index, item in group:
            found = self.settled.get(index)
            if isinstance(found, IngestOutcome) and not found.timings:
                self.settled[index] = replace(found, timings={"route": item.seconds} | watch.laps())
        for part in work.later:  # unreadable with the others, or failed the audit: again, alone
            self.group(target, part)

    def _fail(self, items: list[Item], error: WapError) -> None:
        for index, _ in items:
            self.settled.setdefault(index, error)

    def _once(self, target: TableRef, group: list[Item]) -> list[Item]:
        """The same version announced twice in one delivery is handled once."""
        seen: set[str] = set()
        pending = []
        for index, item in group:
            if item.source.identity in seen:
                self.settled[index] = IngestOutcome(
                    source=item.source, status=OutcomeStatus.DUPLICATE, table=target.qualified,
                    message=f"{item.source.uri} was delivered twice in this batch; it is handled once")
            else:
                seen.add(item.source.identity)
                pending.append((index, item))
        return pending


@dataclass(frozen=True)
class _Written:
    """What one attempt wrote and audited: the files it merges (or keeps), their rows and reports."""

    items: list[Item]
    rows: dict[str, int]
    reports: dict[str, AuditReport]
    quarantined: Mapping[str, Quarantined]
    write: Mapping[str, WritePath]  # how the engine took each file in (registered or rewritten), and why


class _GroupWork(Work):
    """The files of one table (one, or several read together), as the transaction's work."""

    def __init__(self, run: _Run, target: TableRef, todo: list[Item], watch: Stopwatch) -> None:
        self.run_, self.target, self.todo, self.watch = run, target, todo, watch
        self.suite: AuditSuite = run.suites.suite_for(target)
        self.later: list[list[Item]] = []
        self.written: _Written | None = None
        self.beside: ResultsBeside | None = None  # a lone file's results recorded beside its commit (beside.py)

    @property
    def kind(self) -> RunKind:  # type: ignore[override]
        if self.run_.dry_run:
            return RunKind.DRY_RUN
        return RunKind.FILE if len(self.todo) == 1 else RunKind.BATCH

    def tables(self) -> Sequence[TableRef]:
        return [self.target]

    def results(self) -> Sequence[TableRef]:
        return [] if self.run_.dry_run else results_tables(self.run_.ports, [self.target])

    def about(self) -> str:
        identities = [r.source.identity for _, r in self.todo]
        return identities[0] if len(identities) == 1 else group_identity(identities)

    def versions(self) -> Mapping[TableRef, Sequence[SourceObject]]:
        return {self.target: [r.source for _, r in self.todo]}

    def on_main(self, found: Mapping[str, LedgerEntry], note: str) -> bool:
        for index, item in self.todo:
            if item.source.identity in found:  # on main already; its left-over attempts are gone now
                self.run_.settled[index] = duplicate(item.source, self.target, found[item.source.identity], note)
        self.todo = [(i, r) for i, r in self.todo if r.source.identity not in found]
        return not self.todo

    def run(self, branch: Branch, attempt: int) -> Verdict:
        try:
            return self._run(branch)
        finally:
            if self.beside is not None:  # nothing of this attempt lands on its branch after it ends
                self.beside.abandon()

    def _run(self, branch: Branch) -> Verdict:
        ports, config, suite = self.run_.ports, self.run_.config, self.suite
        self.later, self.written, self.beside = [], None, None
        spec = spec_for(suite, self.target, branch.name, alone=len(self.todo) == 1,
                        out_of_time=self.run_.transactions.guards.out_of_time)
        # the history the checks judge against, read once per attempt, beside the write (waited for in the audit)
        context = history_beside(suite, self.target, ports.catalog, config.main_branch, ports.results)
        self.run_.transactions.guards.check_disk(f"{len(self.todo)} file(s) for {self.target}",
                                                 sum(r.local_bytes for _, r in self.todo))
        log.info("writing %d file(s) into %s on branch %s", len(self.todo), self.target, branch.name)
        written = self._alone(spec, context) if len(self.todo) == 1 else self._together(spec, context)
        if written is None:
            return Discard()  # every file runs again alone
        appended, accepted, reports = written
        measured = appended.measured
        self._check_rows(branch, accepted, measured, appended.snapshot.rows if appended.snapshot else 0)
        bound_snapshots(ports, suite, self.target, branch.name, appended.snapshot.snapshots if appended.snapshot else 0)
        rows = {r.source.identity: measured[r.source.identity].row_count for _, r in accepted}
        self.written = _Written(accepted, rows, reports, appended.quarantined, appended.write)
        merge = self._merge(accepted, rows, appended.quarantined, appended.write)
        if self.run_.dry_run:
            return Discard()
        with self.watch.stage("audit"):
            self._record(branch, accepted, reports, measured)
        return Publish(merge) if all(reports[i].passed for i in rows) else Keep(merge)

    def _record(self, branch: Branch, accepted: list[Item], reports: Mapping[str, AuditReport],
                measured: Mapping[str, Measurements]) -> None:
        """The accepted files' audit results: recorded beside the commit already (beside.py), else now."""
        beside = self.beside
        if beside is not None and beside.settle(measured.get(accepted[0][1].source.identity)):
            return
        record_results(self.run_.ports, self.run_.config, self.target, branch.name, [
            (r.source, reports[r.source.identity], measured[r.source.identity]) for _, r in accepted])

    def _alone(self, spec: WriteSpec, context: Callable[[], AuditContext]
               ) -> tuple[Appended, list[Item], dict[str, AuditReport]]:
        (_, item), = self.todo
        run = self.run_
        if run.ports.results is not None and not run.dry_run:  # recorded beside the commit when the engine can
            self.beside = ResultsBeside(run.ports, run.config, self.suite, self.target, spec.branch, item.source,
                                        context)
            spec = replace(spec, before_commit=self.beside.start)
        with self.watch.stage("append"):
            appended = run.ports.writer.append(spec, item.source, item.fmt)
        measured = appended.measured[item.source.identity]
        with self.watch.stage("audit"):
            beside = self.beside
            report = beside.report if beside is not None and beside.report is not None and beside.took(measured) \
                else audit(self.suite, self.target, measured, context())
        return appended, self.todo, {item.source.identity: report}

    def _together(self, spec: WriteSpec, context: Callable[[], AuditContext]
                  ) -> tuple[Appended, list[Item], dict[str, AuditReport]] | None:
        """Several files read together, each audited; those that pass are appended in one snapshot, the others (and
        those that cannot be read or written with them) run again alone. None: nothing was appended."""
        with self.watch.stage("append"):
            staged = self.run_.ports.writer.stage(spec, [(r.source, r.fmt) for _, r in self.todo])
        with staged:
            with self.watch.stage("audit"):
                known = context()
                reports = {i: audit(self.suite, self.target, m, known) for i, m in staged.measured.items()}
            accepted = [(i, r) for i, r in self.todo if _passes(reports.get(r.source.identity),
                                                                staged.measured.get(r.source.identity))]
            with self.watch.stage("append"):
                appended = staged.append([r.source for _, r in accepted]) if accepted else None
            left = {**staged.left_out, **(appended.left_out if appended else {})}
        self.later = [[b] for b in self.todo if b not in accepted or b[1].source.identity in left]
        accepted = [a for a in accepted if a[1].source.identity not in left]
        if appended is None or appended.snapshot is None or not accepted:
            return None
        return appended, accepted, reports

    def _check_rows(self, branch: Branch, accepted: list[Item], measured: Mapping[str, Measurements],
                    snapshot_rows: int) -> None:
        audited = sum(measured[r.source.identity].row_count for _, r in accepted)
        if len(self.todo) == 1 and snapshot_rows == 0:
            source = accepted[0][1].source
            raise EmptySourceError(f"{source.uri}: the file has a header/schema but no rows; nothing to ingest into "
                                   f"{self.target}. Fix: upload a file with data.")
        if snapshot_rows != audited:  # what is merged is exactly what was audited, or nothing
            raise EngineError(f"{self.target} on {branch.name!r}: the snapshot holds {snapshot_rows} rows but the "
                              f"audited files hold {audited}; nothing was published.")

    def _merge(self, accepted: list[Item], rows: dict[str, int], quarantined: Mapping[str, Quarantined],
               write: Mapping[str, WritePath]) -> Merge:
        loaded = [(r.source, rows[r.source.identity]) for _, r in accepted]
        what = accepted[0][1].source.uri if len(accepted) == 1 else f"{len(accepted)} files"
        moved = quarantined.get(accepted[0][1].source.identity) if len(accepted) == 1 else None
        paths = [write.get(r.source.identity) for _, r in accepted]
        return Merge(tuple(Loaded.of(self.target, s, n) for s, n in loaded),
                     f"wap: publish {what} into {self.target} ({sum(rows.values())} rows)",
                     lineage.merge_properties(self.target, loaded) | lineage.quarantine_properties(moved)
                     | lineage.write_properties(paths))

    def settle(self, ended: Ended) -> None:
        """Each written file's outcome, now that the transaction ended."""
        written, run, target = self.written, self.run_, self.target
        if written is None or ended.status == "on main":
            return
        for index, item in written.items:
            source, identity = item.source, item.source.identity
            n, report, moved = written.rows[identity], written.reports[identity], written.quarantined.get(identity)
            how = f"; {written.write[identity]}" if identity in written.write else ""
            if ended.status == "kept":
                outcome = rejected(source, target, str(ended.branch), n, report, run.ports.reports, moved)
                run.settled[index] = replace(outcome, message=outcome.message + how + ended.note,
                                             attempts=ended.attempts)
            elif ended.status == "published":
                log.info("published %s into %s (%d rows%s)", source.uri, target, n, how,
                         extra=about(source, target, ended.branch))
                run.settled[index] = IngestOutcome(
                    source=source, status=OutcomeStatus.PUBLISHED, table=target.qualified, branch=ended.branch,
                    rows=n, report=report, merged_hash=ended.merged_hash, attempts=ended.attempts, quarantined=moved,
                    message=f"published {n} rows into {target}" + (
                        f" (one merge for {len(written.items)} files)" if len(written.items) > 1 else "")
                    + how + quarantine_note(moved, source) + ended.note)
            elif run.dry_run:
                run.settled[index] = IngestOutcome(
                    source=source, status=OutcomeStatus.AUDITED if report.passed else OutcomeStatus.REJECTED,
                    table=target.qualified, rows=n, report=report,
                    message="dry run: the file would be " + ("published" if report.passed else "rejected")
                    + f"; nothing was published{ended.note}")


def _passes(report: AuditReport | None, measured: Measurements | None) -> bool:
    return report is not None and measured is not None and report.passed and measured.row_count > 0
