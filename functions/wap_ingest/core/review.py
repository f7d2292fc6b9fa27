"""What an operator does with a branch a rejected file left open: publish it after review, or discard it.

Only a branch the service kept for review is published: a rejected file's or load's, carrying the plan its run
recorded, whose changes are exactly that plan (core.merge_plan); never a dry run's, a maintenance's or a group's
branch, one without a plan, or one with a commit the service did not make.
Publishing re-runs the table's audit suite on the branch's new rows first (unless the operator overrides it
with a reason), and never forces: if `main` changed the same table since the branch was made, the merge is
refused and the operator is told to re-ingest the file (its rows would otherwise be merged over other
writers'). It is idempotent: a branch whose rows are already on `main` is reported as published.
Who decided and why is recorded: a publish on its merge commit, a discard in the decision log.
Pruning discards the branches older than a threshold (age: the time of the branch's head commit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from . import lineage
from .branches import BRANCH_PREFIX, digest_from_branch, identity_digest, parse_branch, table_from_branch
from .errors import BranchNotFoundError, CatalogError, MergeConflictError, StaleHashError, WapError
from .maintenance import summary_line
from .merge_plan import NotPublishableError, kind_refusal
from .models import AuditReport, Branch, DecisionRecord, Publication, TableRef
from .pipeline import Transactions
from .ports import CatalogBranches, DecisionLog

DECISION_PREFIX = lineage.DECISION_PREFIX
PASSED_REAUDIT = "re-audit passed"

# (table, branch) -> the wap.source.* properties of the branch's WAP append (empty when it has none)
SourceOf = Callable[[TableRef, str], Mapping[str, str]]
# (table, branch, source identity) -> the table's audit suite run on the rows that append added
Reaudit = Callable[[TableRef, str, str], AuditReport]


class ReauditFailedError(CatalogError):
    """The branch's new rows still fail the table's audit suite; publishing them needs an override."""

    def __init__(self, message: str, report: AuditReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Decision:
    branch: str
    table: TableRef
    action: str  # "published" or "discarded"
    reason: str
    actor: str
    merged_hash: str | None = None
    already: bool = False  # nothing was done: it had been published before (idempotent repeat)
    reaudit: AuditReport | None = None  # None: not re-audited (--no-reaudit, a discard, or already published)
    source: str | None = None  # s3://bucket/key of the branch's file, when known
    recorded_at: str | None = None  # where the decision is recorded (a commit hash or a URI)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def wap_table(name: str, default_namespace: str) -> TableRef:
    table = table_from_branch(name, default_namespace)
    if table is None:
        raise CatalogError(f"{name!r} is not a WAP branch (wap-[<namespace>.]<table>-<digest>-...); refusing to "
                           f"touch it.")
    return table


def wap_branch(catalog: CatalogBranches, name: str, default_namespace: str) -> tuple[Branch, TableRef]:
    table = wap_table(name, default_namespace)
    branch = catalog.find_branch(name)
    if branch is None:
        raise BranchNotFoundError(
            f"branch {name!r} does not exist (already published or discarded?). List open ones: wap branches"
        )
    return branch, table


source_uri = lineage.source_uri


def published_on_main(catalog: CatalogBranches, table: TableRef, name: str, main: str = "main") -> Publication | None:
    """The merge into `main` that published this branch's rows: a reviewed publish of the branch itself, or
    any publish of the same source object version (its identity's digest is part of the branch name)."""
    digest = digest_from_branch(name)
    for publication in catalog.publications(table, on=main, limit=1000):
        props = publication.properties
        if props.get(f"{DECISION_PREFIX}branch") == name:
            return publication
        identities = [f.identity for f in lineage.published_files(props)]
        if digest is not None and any(identity_digest(i) == digest for i in identities):
            return publication
    return None


def _already(name: str, table: TableRef, publication: Publication) -> Decision:
    props = publication.properties
    return Decision(name, table, "published", props.get(f"{DECISION_PREFIX}reason", "audit passed"),
                    props.get(f"{DECISION_PREFIX}actor", "wap (automatic publish)"), publication.hash,
                    already=True, source=source_uri(props), recorded_at=publication.hash)


def _refuse_missing(name: str, table: TableRef, decisions: DecisionLog | None) -> BranchNotFoundError:
    for record in decisions.decisions(table, limit=1000) if decisions is not None else []:
        if record.branch == name and record.action == "discarded":
            again = f" To load the file again: wap ingest {record.source}" if record.source else ""
            return BranchNotFoundError(
                f"branch {name!r} was discarded by {record.actor} at {record.decided_at} ({record.reason}); its rows "
                f"are not on main and there is nothing to publish.{again}"
            )
    return BranchNotFoundError(
        f"branch {name!r} does not exist and its rows are not on main (never created, or discarded without a "
        f"record). List open ones: wap branches"
    )


def publish_branch(
    transactions: Transactions,
    name: str,
    *,
    reason: str | None,
    actor: str,
    source_of: SourceOf,
    reaudit: Reaudit | None,
    decisions: DecisionLog | None = None,
) -> Decision:
    """Merge a branch kept for review into `main`, through the transaction (`kept_for_review`, `publish_kept`):
    only a rejected file's or load's branch, with the plan its run recorded, whose changes are exactly that plan (a
    dry run's, a maintenance's, a group's branch, one without a plan or with a commit the service did not make is
    refused, NotPublishableError or ForeignChangeError). The ledger entries of every file it carries ride the
    merge, whoever asked for it. `reaudit=None` skips the re-audit and then needs a reason. `source_of`: the
    branch's append's source, named in the fix of a branch without a plan."""
    catalog, main = transactions.catalog, transactions.config.main_branch
    table = wap_table(name, transactions.config.default_namespace)
    run = parse_branch(name)
    if run is not None and not run.kind.kept_when_rejected:  # before anything else: never one of these
        raise NotPublishableError(kind_refusal(name, run.kind.value))
    if reaudit is None and not (reason or "").strip():
        raise CatalogError(
            f"publishing {name!r} without re-auditing it (--no-reaudit) publishes rows whose audit failed: say why "
            f"with --reason '...' (it is recorded on the merge commit)."
        )
    branch = catalog.find_branch(name)
    earlier = published_on_main(catalog, table, name, main)
    if earlier is not None:
        if branch is not None:  # merged, then interrupted before the branch was deleted
            transactions.branches.discard(name, branch)
        return _already(name, table, earlier)
    if branch is None:
        raise _refuse_missing(name, table, decisions)
    kept = transactions.kept_for_review(name, lambda: source_uri(source_of(table, name)))
    merge = kept.merge
    reports = [reaudit(f.table, name, f.identity) for f in merge.files] if reaudit is not None else []
    failed = "; ".join(f"{c.check}({c.target}): {c.measured}, expected {c.expected}" for r in reports
                       for c in r.failures)
    if failed:
        raise ReauditFailedError(
            f"branch {name!r} still fails the audit of {table}: {failed}. Nothing was published. Fix: correct "
            f"the file and upload it again, or correct the audit suite (WAP_AUDITS_FILE) and publish again; to "
            f"publish these rows as they are: wap publish {name} --no-reaudit --reason '<why they are fine>'",
            next(r for r in reports if not r.passed),
        )
    report = reports[0] if len(reports) == 1 else None
    why = (reason or "").strip() or PASSED_REAUDIT
    decision = {f"{DECISION_PREFIX}action": "published", f"{DECISION_PREFIX}reason": why,
                f"{DECISION_PREFIX}actor": actor, f"{DECISION_PREFIX}branch": name,
                f"{DECISION_PREFIX}reaudit": "skipped" if reaudit is None else "passed"}
    try:
        ended = transactions.publish_kept(kept, f"wap: publish reviewed branch {name} ({why})", decision)
    except MergeConflictError as exc:
        raise MergeConflictError(
            f"{exc} The branch's rows cannot be published without overwriting rows published since. Fix: "
            f"discard the branch and ingest the file again (it will be audited against the current main)."
        ) from exc
    uri = merge.files[0].uri if len(merge.files) == 1 else source_uri(merge.properties)
    if ended.status == "on main":
        return Decision(name, table, "published", "its files were published meanwhile", "wap", already=True,
                        source=uri)
    return Decision(name, table, "published", why, actor, ended.merged_hash, reaudit=report, source=uri,
                    recorded_at=ended.merged_hash)


def discard_branch(
    catalog: CatalogBranches,
    name: str,
    *,
    reason: str,
    actor: str,
    decisions: DecisionLog,
    default_namespace: str,
    source_of: SourceOf | None = None,
) -> Decision:
    """Delete the branch, then record the decision (a record is only written for a branch really deleted)."""
    table = wap_table(name, default_namespace)
    if not reason.strip():
        raise CatalogError(f"say why {name!r} is discarded: --reason '...' (it is recorded)")
    branch = catalog.find_branch(name)
    if branch is None:
        for record in decisions.decisions(table, limit=1000):
            if record.branch == name and record.action == "discarded":
                return Decision(name, table, "discarded", record.reason, record.actor, already=True,
                                source=record.source)
        raise BranchNotFoundError(f"branch {name!r} does not exist (already published?). See: wap history {table}")
    source = None
    if source_of is not None:
        try:
            source = source_uri(source_of(table, name))
        except WapError:
            source = None  # the record still says who discarded which branch and why
    catalog.delete_branch(branch)
    record = DecisionRecord(table.qualified, name, "discarded", reason, actor, now_iso(), source)
    try:
        where = decisions.record(record)
    except WapError as exc:
        raise type(exc)(f"branch {name!r} was discarded but the decision could not be recorded: {exc}") from exc
    return Decision(name, table, "discarded", reason, actor, source=source, recorded_at=where)


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a table's history: a publication on main or a recorded discard."""

    at: datetime
    action: str  # "published" or "discarded"
    how: str  # "audit passed", "reviewed"; "pruned"/"by hand" for discards; "swept" for files `wap maintain` removed
    branch: str | None
    actor: str | None
    reason: str | None
    source: str | None
    rows: int | None
    hash: str | None
    reaudit: str | None = None  # for reviewed publishes: "passed" or "skipped"
    properties: Mapping[str, str] = field(default_factory=dict)
    write: str | None = None  # how the engine took the file in: "registered (why)" or "rewritten (why)"

    def to_dict(self) -> dict[str, object]:
        return {"at": self.at.isoformat(), "action": self.action, "how": self.how, "branch": self.branch,
                "actor": self.actor, "reason": self.reason, "source": self.source, "rows": self.rows,
                "hash": self.hash, "reaudit": self.reaudit, "properties": dict(self.properties), "write": self.write}


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (Nessie's `...Z` too) as an aware datetime; unreadable times sort first (epoch)."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _rows(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def history_for(
    catalog: CatalogBranches, decisions: DecisionLog | None, table: TableRef, *, main: str = "main", limit: int = 100
) -> list[HistoryEntry]:
    """Publications on `main` and recorded discards, merged newest first."""
    entries = [entry for pub in catalog.publications(table, on=main, limit=limit)
               for entry in publication_entries(pub, table)]
    for record in decisions.decisions(table, limit=limit) if decisions is not None else []:
        entries.append(HistoryEntry(
            at=parse_time(record.decided_at), action=record.action,
            how="pruned" if record.reason.startswith("pruned:") else "swept" if record.action == "swept" else
            "by hand", branch=record.branch,
            actor=record.actor, reason=record.reason, source=record.source, rows=None, hash=None,
        ))
    return sorted(entries, key=lambda e: e.at, reverse=True)[:limit]


def publication_entries(pub: Publication, table: TableRef) -> list[HistoryEntry]:
    """What one merge into main did to `table`: a line per file it published there, or what a maintenance did."""
    entries: list[HistoryEntry] = []
    props = pub.properties
    reviewed = props.get(f"{DECISION_PREFIX}action") == "published"
    path = lineage.write_path(props)
    write = None if path is None else str(path)
    if lineage.is_batch(props):  # one merge for a burst's (or a load's) files: one line per file of this table
        files = lineage.published_files(props, table)
        how = f"load {props[lineage.LOAD]}" if lineage.LOAD in props else f"batch of {len(files)}"
        entries += [HistoryEntry(
            at=parse_time(pub.committed_at), action="published",
            how=f"reviewed ({how})" if reviewed else f"audit passed ({how})",
            branch=props.get(f"{DECISION_PREFIX}branch"), actor=props.get(f"{DECISION_PREFIX}actor"),
            reason=props.get(f"{DECISION_PREFIX}reason"), source=file.uri, rows=file.rows, hash=pub.hash,
            reaudit=props.get(f"{DECISION_PREFIX}reaudit"),
            properties={lineage.IDENTITY: file.identity}, write=file.write or write) for file in files]
        return entries
    maintained = summary_line(props)
    if maintained is not None:  # `wap maintain`: what it did, no rows published
        entries.append(HistoryEntry(at=parse_time(pub.committed_at), action="maintained", how=maintained,
                                    branch=None, actor=None, reason=None, source=None, rows=None, hash=pub.hash))
        return entries
    entries.append(HistoryEntry(
        at=parse_time(pub.committed_at), action="published", how="reviewed" if reviewed else "audit passed",
        branch=props.get(f"{DECISION_PREFIX}branch"), actor=props.get(f"{DECISION_PREFIX}actor"),
        reason=props.get(f"{DECISION_PREFIX}reason"), source=source_uri(props),
        rows=_rows(props.get(lineage.TOTAL_ROWS)),
        hash=pub.hash, reaudit=props.get(f"{DECISION_PREFIX}reaudit"), properties=props, write=write,
    ))
    return entries


@dataclass(frozen=True)
class OpenBranch:
    """An open WAP branch, with the time of its head commit (None: no commit, age unknown)."""

    name: str
    hash: str
    table: TableRef
    head_time: datetime | None

    def age(self, now: datetime) -> timedelta | None:
        return None if self.head_time is None else max(timedelta(0), now - self.head_time)


def open_branches(
    catalog: CatalogBranches, *, now: datetime, default_namespace: str, table: TableRef | None = None,
    older_than: timedelta | None = None,
) -> list[OpenBranch]:
    """The open WAP branches, optionally of one table and older than a threshold, oldest first."""
    found = []
    for branch in catalog.list_branches(f"{BRANCH_PREFIX}-"):
        owner = table_from_branch(branch.name, default_namespace)
        if owner is None or (table is not None and owner != table):
            continue
        try:
            head = catalog.head_commit(branch.name)
        except BranchNotFoundError:
            continue  # discarded or published since it was listed
        head_time = parse_time(head.committed_at) if head is not None and head.committed_at else None
        candidate = OpenBranch(branch.name, branch.hash, owner, head_time)
        age = candidate.age(now)
        if older_than is None or (age is not None and age >= older_than):
            found.append(candidate)
    return sorted(found, key=lambda b: (b.head_time is None, b.head_time or now, b.name))


@dataclass(frozen=True)
class Pruned:
    discarded: tuple[OpenBranch, ...]
    skipped: tuple[tuple[OpenBranch, str], ...]  # (branch, why): it moved or vanished since it was listed
    unrecorded: tuple[tuple[OpenBranch, str], ...] = ()  # discarded, but the decision could not be recorded


def prune_branches(
    catalog: CatalogBranches,
    stale: list[OpenBranch],
    *,
    dry_run: bool,
    decisions: DecisionLog | None = None,
    reason: str = "pruned",
    actor: str = "wap prune",
) -> Pruned:
    """Discard each branch at the hash its age was read at: a branch that moved since is left alone.
    Each discard is recorded in the decision log when one is given."""
    if dry_run:
        return Pruned(tuple(stale), ())
    discarded, skipped, unrecorded = [], [], []
    for branch in stale:
        try:
            catalog.delete_branch(Branch(branch.name, branch.hash))
            discarded.append(branch)
        except (BranchNotFoundError, StaleHashError) as exc:
            skipped.append((branch, str(exc)))
            continue
        if decisions is not None:
            try:
                decisions.record(DecisionRecord(branch.table.qualified, branch.name, "discarded", reason, actor,
                                                now_iso()))
            except WapError as exc:
                unrecorded.append((branch, str(exc)))
    return Pruned(tuple(discarded), tuple(skipped), tuple(unrecorded))
