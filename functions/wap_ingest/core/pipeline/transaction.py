"""The WAP transaction, owned once: every branch the service makes and every merge into `main` go through here.

One attempt: check the guards (time left, disk), read main's hash, look the object versions up in the ledger on
`main` (those found are the work's to settle: nothing is written twice), name the branch (core.branches: one scheme
for every kind of run), create it from main@hash, create there the namespaces main lacks (a namespace reaches main
only with audited rows, merged), let the work write and audit on it, then act on the work's verdict:
- Publish: record the ledger entry of every object version the merge publishes on the branch, check what the branch
  changed against the run's plan (core.merge_plan), merge it expecting main@hash, delete it and the attempts it makes
  obsolete;
- Keep (an audit failed): record the same ledger entries on the branch, with the merge that would publish it and the
  plan (each key the run changed, fingerprinted as the service left it) on that commit, so a reviewed publish later
  (`kept_for_review`, `publish_kept`) publishes exactly what the pipeline would have, or nothing; keep it open;
- Discard (a dry run, nothing to do, or parts to run apart): delete it.
Every merge into main, whatever the path, brings exactly the keys of its run's plan (its tables, their quarantine
tables, the namespaces it created, its ledger entries), at the content the service committed, and is made from the
hash that was checked (`_checked`): anything else on the branch refuses it (a ForeignChangeError naming the key and
the commit), and nothing is merged.
A conflict with another writer (or a branch that vanished, or main that moved) deletes the attempt's branch and
starts again from a fresh `main` with capped, jittered back-off, never a forced merge; any other failure deletes the
branch and is raised, with a note when the branch could not be deleted. A failure to delete a branch after a merge is
noted, never raised: the merge stands. File groups (groups.py), multi-table loads (loads.py), maintenance
(maintain.py) and dry runs hand this module their work and verdict; a reviewed publish calls `publish_kept`.
No other module creates or merges a branch (tests/unit/project/test_layering.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from wap_ingest.core import ledger, lineage, merge_plan
from wap_ingest.core.branches import RunBranches, RunKind, parse_branch, run_branch_name
from wap_ingest.core.errors import (
    BadInputError,
    BranchNotFoundError,
    CatalogError,
    WapError,
)
from wap_ingest.core.meanwhile import Meanwhile
from wap_ingest.core.merge_plan import CommitInfo, ForeignChangeError, MergePlan, NotPublishableError, Violation
from wap_ingest.core.models import Branch, SourceObject, TableRef
from wap_ingest.core.ports import CatalogBranches
from wap_ingest.core.stopwatch import Stopwatch

from .base import RETRY_FROM_MAIN, PipelineConfig, retry_delay
from .work import Discard, Ended, Guards, Keep, Loaded, Merge, Publish, Verdict, Work

__all__ = ["Discard", "Ended", "Guards", "Keep", "Kept", "Loaded", "Merge", "Publish", "Transactions", "Verdict",
           "Work"]

log = logging.getLogger(__name__)


class Transactions:
    """The transaction owner for one catalog and one pipeline configuration."""

    def __init__(self, catalog: CatalogBranches, config: PipelineConfig, guards: Guards | None = None) -> None:
        self.catalog, self.config, self.guards = catalog, config, guards or Guards()
        self.branches = RunBranches(catalog, clock=config.clock, abandoned_after=config.abandoned_after_seconds,
                                    default_namespace=config.default_namespace)

    def run(self, work: Work, watch: Stopwatch | None = None) -> Ended:
        """Run `work` to its end: published, kept, discarded or found on main. Raises what the work raised (after
        deleting the attempt's branch), or the last conflict when every attempt lost one."""
        watch = watch or Stopwatch()
        for attempt in range(1, self.config.merge_attempts + 1):
            self.guards.check_time(f"{work.kind.name.lower()} run of {work.tables()[0]}")
            with watch.stage("branch"):
                main_hash, missing = self._main(work)
                found = self._published_beside(work)  # looked up while the branch is made
                try:
                    branch = self.catalog.create_branch(self._branch_name(work), main_hash)
                    published = found()
                except BaseException:
                    found.wait()
                    raise
                if published:  # some are on main already: the branch goes, and the run goes on as it always did
                    self.branches.discard(branch.name)
                    if not self._left_to_do(work, published):
                        return Ended("on main", attempt)
                    branch = self.catalog.create_branch(self._branch_name(work), main_hash)
            try:
                with watch.stage("branch"):  # a new namespace reaches main only with the audited rows, merged
                    for namespace in missing:
                        self.catalog.ensure_namespace(branch.name, namespace)
                verdict = work.run(branch, attempt)
                stage = {Publish: "merge", Keep: "keep"}.get(type(verdict), "discard")
                with watch.stage(stage):
                    return self._end(work, branch, verdict, main_hash, attempt, missing)
            except RETRY_FROM_MAIN as exc:
                self.branches.discard(branch.name)
                if attempt == self.config.merge_attempts:
                    raise
                delay = retry_delay(attempt, self.config)
                log.info("%s: conflict (attempt %d), again from main in %.2fs: %s", branch.name, attempt, delay, exc)
                self.config.sleep(delay)
            except BadInputError as exc:
                _raise_noted(exc, self.branches.discard(branch.name))
            except WapError as exc:
                if self.branches.vanished(branch.name):  # a concurrent attempt finished the work meanwhile: again
                    if attempt == self.config.merge_attempts:
                        raise BranchNotFoundError(f"branch {branch.name!r} was deleted during the run: {exc}") from exc
                    continue
                _raise_noted(exc, self.branches.discard(branch.name))
            except Exception:  # a bug: nothing of this attempt stays behind (a process that dies leaves its branch to
                self.branches.discard(branch.name)  # the next run's clean-up)
                raise
        raise CatalogError("merge_attempts must be at least 1")  # pragma: no cover (the loop returns or raises)

    def _main(self, work: Work) -> tuple[str, list[str]]:
        """Main's head, and the work's namespaces main does not have yet (they are made on the run's branch)."""
        main = self.config.main_branch
        main_hash = self.catalog.reference_hash(main)
        missing = [ns for ns in _namespaces(work) if not self.catalog.has_namespace(main, ns)]
        if missing and work.kind is not RunKind.DRY_RUN and self.catalog.head_commit(main) is None:
            # Nessie cannot merge into a main without a commit: its first is the ledger's namespace, the service's own
            main_hash = self.catalog.ensure_namespace(main, ledger.LEDGER_NAMESPACE)
        return main_hash, missing

    def _branch_name(self, work: Work) -> str:
        """A new attempt's branch name (its start time in it)."""
        return run_branch_name(work.kind, work.tables()[0], work.about(), started=self.config.clock(),
                               default_namespace=self.config.default_namespace)

    @staticmethod
    def _versions(work: Work) -> dict[TableRef, Sequence[SourceObject]]:
        """The object versions the work publishes, by table (none for a dry run, which publishes nothing)."""
        return {t: v for t, v in work.versions().items() if v} if work.kind is not RunKind.DRY_RUN else {}

    def _published_beside(self, work: Work) -> Meanwhile[dict[str, ledger.LedgerEntry]]:
        """The work's versions looked up in the ledger on main, in a thread started now."""
        versions = self._versions(work)
        return Meanwhile(lambda: {entry_id: entry for table, sources in versions.items()
                                  for entry_id, entry in self.catalog.find_published(
                                      self.config.main_branch, table, [s.identity for s in sources]).items()},
                         "ledger-lookup")

    def _left_to_do(self, work: Work, found: Mapping[str, ledger.LedgerEntry]) -> bool:
        """Hand the work's versions found on main to the work (after deleting their attempts)."""
        versions = self._versions(work)
        if not found:
            return True
        note = self.branches.clean_up(versions, list(found))
        return not work.on_main(found, note)

    def _end(self, work: Work, branch: Branch, verdict: Verdict, main_hash: str, attempt: int,
             missing: Sequence[str]) -> Ended:
        if isinstance(verdict, Discard):
            return Ended("discarded", attempt, branch.name, note=self.branches.discard(branch.name))
        merge = verdict.merge
        about = [work.about(), *(f.identity for f in merge.files)]
        plan = merge_plan.plan_for(main_hash, [*work.tables(), *work.results()], missing,
                                   [(f.table, f.identity) for f in merge.files],
                                   quarantine=work.kind is not RunKind.MAINTAIN, quarantined=work.tables())
        if isinstance(verdict, Keep):
            plan = self._fingerprint(branch.name, plan)
            self._record(branch.name, merge, lineage.pending_properties(merge.message, merge.properties)
                         | merge_plan.plan_properties(plan))
            return Ended("kept", attempt, branch.name,
                         note=self.branches.clean_up(work.tables(), about, mine=branch.name, kept=True))
        head = self._record(branch.name, merge).hash if merge.files else None
        checked = self._checked(branch.name, plan, head, merge_plan.AUTOMATIC_FIX)
        listed = self.branches.listing(work.tables())  # what the clean-up deletes, listed while the merge runs
        # a conflict is raised to `run`, which deletes the branch and starts again from main
        merged = self.catalog.merge(checked, self.config.main_branch, main_hash, merge.message, merge.properties)
        return Ended("published", attempt, branch.name, merged,
                     note=self.branches.clean_up(work.tables(), about, mine=branch.name, listed=listed))

    def _fingerprint(self, name: str, plan: MergePlan) -> MergePlan:
        """The plan of a branch about to be kept: each key the run changed, as the service left it (read now)."""
        changes = self.catalog.changes(name, plan.base)
        foreign = merge_plan.outside(plan, changes)
        if foreign:  # kept all the same (its rows are the evidence): its publish refuses it, naming them
            log.warning("%s: kept with changes outside its run's plan: %s", name,
                        ", ".join(merge_plan.name_of(k) for k in foreign))
        return merge_plan.fingerprinted(plan, changes)

    def _checked(self, name: str, plan: MergePlan, head: str | None, fix: str,
                 found: Sequence[Violation] = (), commits: Sequence[CommitInfo] | None = None) -> Branch:
        """The branch at the hash to merge, once what it changed since the plan's base is exactly the plan: every
        key the plan names at the content the service committed, and nothing else. `head`: the service's last
        commit on it (None: whatever the head is now); `found`: what the caller found wrong already. Raises a
        ForeignChangeError naming each key and the commit that changed it (`commits`: the branch's log since the
        base, read here if not given), and nothing is merged."""
        changes = self.catalog.changes(name, plan.base)
        problems = [*merge_plan.violations(plan, changes), *found]
        moved = head is not None and changes.head != head and not found
        if not problems and not moved:
            return Branch(name, changes.head)
        if commits is None:
            try:
                commits = self.catalog.commit_log(name, until=plan.base)
            except WapError as exc:  # the refusal stands; only the commits go unnamed
                log.warning("%s: its commits could not be read to name them: %s", name, exc)
        if moved and head is not None:  # each commit after the service's last one, named
            hashes = [c.hash for c in commits or ()]
            later = list(commits or ())[:hashes.index(head)] if head in hashes else []
            problems += [Violation(None, f"a commit after the service's last one ({head[:12]})", c) for c in later
                         ] or [Violation(None, f"it moved past the service's last commit {head[:12]} to "
                                               f"{changes.head[:12]}")]
        raise ForeignChangeError(merge_plan.refusal(name, problems, commits, fix))

    def _record(self, name: str, merge: Merge, properties: Mapping[str, str] | None = None) -> Branch:
        """The ledger entries of the versions the merge publishes, in one commit on the branch carrying
        `properties`."""
        entries = [ledger.entry_for(f.table, f.identity, f.uri, f.rows, name, self.config.clock())
                   for f in merge.files]
        return self.catalog.record_published(name, entries, properties)

    def kept_for_review(self, name: str, source: Callable[[], str | None] = lambda: None) -> Kept:
        """A branch this transaction kept for review, checked as its publish will be (`publish_kept` checks again,
        right before its merge): of a kind kept for review (a file's or a load's), with the plan its run recorded
        on its ledger commit, that commit its head, every commit since its base made by the principal that made
        that one, and what it changed exactly that plan. Raises NotPublishableError (`source`: the branch's source
        object, for the fix of one without a plan) or ForeignChangeError; nothing is changed."""
        run = parse_branch(name)
        if run is None:
            raise CatalogError(f"{name!r} is not a WAP branch (wap-[<namespace>.]<table>-<digest>-...); refusing "
                               f"to touch it.")
        if not run.kind.kept_when_rejected:
            raise NotPublishableError(merge_plan.kind_refusal(name, run.kind.value))
        head = self.catalog.head_commit(name)
        if head is not None and merge_plan.carries_plan(head.properties):
            properties: Mapping[str, str] = head.properties
        else:  # not the head: commits after it are refused below, naming them
            planned = merge_plan.plan_commit(self.catalog.commit_log(name, limit=PLAN_SEARCH))
            properties = planned.properties if planned is not None else {}
        recorded = _planned(properties)
        if recorded is None:
            raise NotPublishableError(_no_plan(name, source))
        merge, plan = recorded
        commits = tuple(self.catalog.commit_log(name, until=plan.base))
        kept = Kept(name, merge, plan, commits)
        self._checked(name, plan, kept.head, merge_plan.review_fix(name), kept.problems(), commits)
        return kept

    def publish_kept(self, kept: Kept, message: str, decision: Mapping[str, str]) -> Ended:
        """Merge a branch kept for review (`kept_for_review`'s answer): the ledger on main first (versions published
        since: nothing to merge, the branch is deleted), then the plan checked again and one merge of exactly the
        plan commit, expecting main's current hash, with `decision` added to the merge's properties. Never retried
        from main: a conflict means main changed the same table since the branch was made, and its rows cannot be
        merged without overwriting others' (the operator re-ingests instead)."""
        name, merge = kept.name, kept.merge
        run = parse_branch(name)
        tables = sorted({f.table for f in merge.files} | (
            {run.table_in(self.config.default_namespace)} if run is not None else set()), key=lambda t: t.qualified)
        about = [f.identity for f in merge.files]
        found: dict[str, ledger.LedgerEntry] = {}
        for table in tables:
            found |= self.catalog.find_published(self.config.main_branch, table,
                                                 [f.identity for f in merge.files if f.table == table])
        if merge.files and len(found) == len(merge.files):
            return Ended("on main", 1, name, note=self.branches.clean_up(tables, about, mine=name))
        if found:
            raise CatalogError(
                f"{len(found)} of the {len(merge.files)} files on branch {name!r} are on main already (published "
                f"apart from it: {', '.join(sorted(e.source for e in found.values()))}); merging it would publish "
                f"them twice. Fix: discard the branch and ingest the others again.")
        main_hash = self.catalog.reference_hash(self.config.main_branch)
        checked = self._checked(name, kept.plan, kept.head, merge_plan.review_fix(name), kept.problems(),
                                kept.commits)
        merged = self.catalog.merge(checked, self.config.main_branch, main_hash, message,
                                    dict(merge.properties) | dict(decision))
        return Ended("published", 1, name, merged, note=self.branches.clean_up(tables, about, mine=name))


@dataclass(frozen=True)
class Kept:
    """A branch kept for review, as its plan commit recorded it: the merge that publishes it, the plan, and the
    branch's commits since the plan's base (newest first; the service's own are the plan commit and those below)."""

    name: str
    merge: Merge
    plan: MergePlan
    commits: tuple[CommitInfo, ...]

    @property
    def head(self) -> str:
        """What publishing it merges: the plan commit (never a later one)."""
        planned = merge_plan.plan_commit(self.commits)
        return planned.hash if planned is not None else self.plan.base

    def problems(self) -> list[Violation]:
        return merge_plan.log_problems(self.plan, self.commits)


PLAN_SEARCH = 50  # how far down a kept branch's log its plan commit is looked for when it is not the head


def _planned(properties: Mapping[str, str]) -> tuple[Merge, MergePlan] | None:
    """The merge and the plan a plan commit's properties recorded, or None (none, or one that cannot be read)."""
    pending = lineage.planned_merge(properties)
    if pending is None:
        return None
    message, merged = pending
    files = tuple(Loaded(TableRef(*table.split(".", 1)), f.identity, f.uri, f.rows or 0)
                  for table, f in lineage.published_by_table(merged) if "." in table)
    plan = merge_plan.plan_from(properties, [(f.table, f.identity) for f in files])
    return None if plan is None else (Merge(files, message, merged), plan)


def _no_plan(name: str, source: Callable[[], str | None]) -> str:
    try:
        uri = source()
    except WapError:
        uri = None
    return merge_plan.no_plan_refusal(name, uri)


def _namespaces(work: Work) -> list[str]:
    return sorted({t.namespace for t in [*work.tables(), *work.results()]})


def _raise_noted(exc: WapError, note: str) -> NoReturn:
    """Raise `exc`, with the clean-up's note appended to its message when there is one (the same class)."""
    if not note:
        raise exc
    try:
        noted = type(exc)(f"{exc}{note}")
    except TypeError:  # an error whose constructor takes more than the message keeps its own
        raise exc from None
    noted.__dict__.update({k: v for k, v in exc.__dict__.items() if k not in noted.__dict__})
    raise noted from exc
