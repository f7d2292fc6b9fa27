"""What each `wap` command family is handed: its use cases, built from one Service (root.py) of the process. A `wap`
process runs one command, so these are built per command (the pipeline's from the process's checked Service); a
command reads no setting and reaches no adapter through a service object. `wap publish` through the service gets
`OperatorCommands.requests` (`PublishRequests`).

| family | handed |
|---|---|
| `wap ingest`, `wap audit`, `wap maintain` (the pipeline's) | `PipelineCommands` |
| `wap branches`, `prune`, `show`, `publish`, `discard`, `history`, `tables` | `OperatorCommands` |
| `wap dlq list|redrive` | `DeadLetterCommands` |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from wap_ingest.adapters.aws import SqsDeadLetters, SqsPublishRequests
from wap_ingest.core.dry_run import DryRun
from wap_ingest.core.errors import WapError
from wap_ingest.core.ingest import Item
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import Branch, JobRun, SourceObject, TableRef
from wap_ingest.core.naming import table_ref_from
from wap_ingest.core.operations import prune_and_tell
from wap_ingest.core.pipeline import Result
from wap_ingest.core.publish_requests import PublishRequest
from wap_ingest.core.review import Decision, HistoryEntry, OpenBranch, Pruned, wap_branch
from wap_ingest.core.routing import objects_at
from wap_ingest.core.table_loads import last_loads

from . import builders
from .root import Service

if TYPE_CHECKING:
    from wap_ingest.adapters.aws import DeadLetter
    from wap_ingest.adapters.catalog import BranchChanges


class PipelineCommands:
    """`wap ingest` (objects under a URI through the one ingest), `wap audit` (a dry run) and `wap maintain`."""

    def __init__(self, root: Service) -> None:
        self._root = root

    def table(self, name: str, source: str) -> TableRef:
        """A table named on the command line (`<table>` or `<namespace>.<table>`)."""
        return table_ref_from(name, default_namespace=self._root.settings.namespace, source=source)

    def sources(self, bucket: str, key: str, uri: str) -> list[SourceObject]:
        config = self._root.config
        return objects_at(bucket, key, uri, objects=self._root.objects, source_buckets=config.source_buckets,
                          refused_buckets=config.refused_buckets)

    def ingest(self, items: Sequence[Item]) -> list[Result]:
        return self._root.ingest_all(items)

    def audit(self, source: SourceObject, table: str | None) -> DryRun:
        return self._root.audit_file(source, table)

    def maintain(self, table: TableRef | None, *, dry_run: bool) -> list[MaintenanceReport | WapError]:
        return self._root.maintain(table, dry_run=dry_run)


@dataclass(frozen=True)
class PublishRequests:
    """`wap publish` through the service (WAP_PUBLISH_QUEUE_URL): the request signed with the operator's AWS
    credentials, sent to the ingest queue, and the answer waited for where the service writes it."""

    sign: Callable[[PublishRequest], PublishRequest]
    send: Callable[[str, PublishRequest], str]  # (queue URL, request) -> the message id
    where: Callable[[str], str]  # request id -> where its answer is written
    wait: Callable[[str, float], dict[str, Any] | None]  # (request id, seconds) -> the answer, or None


class OperatorCommands:
    """The operator's commands on the branches rejected files leave open, and on the tables."""

    def __init__(self, root: Service) -> None:
        self._root = root
        self.main: str = root.settings.main_branch  # the branch readers see (named in the commands' answers)

    def table(self, name: str, source: str) -> TableRef:
        """A table named on an operator's command line: a service-written audit results table too (to read it or
        maintain it), never the ledger."""
        return table_ref_from(name, default_namespace=self._root.settings.namespace, source=source, results=True)

    def actor(self) -> str:
        return self._root.actor()

    def branches(self, table: TableRef | None = None, older_than: timedelta | None = None) -> list[OpenBranch]:
        return self._root.branches(table, older_than)

    def job_runs(self, table: TableRef | None = None) -> list[JobRun]:
        return self._root.job_runs(table)

    def prune(self, stale: list[OpenBranch], *, dry_run: bool, reason: str, actor: str) -> Pruned:
        """The branches discarded (each recorded), then one summary alert."""
        root = self._root
        return prune_and_tell(lambda: root.prune(stale, dry_run=dry_run, reason=reason, actor=actor),
                              dry_run=dry_run, reason=reason, actor=actor, notifier=root.notifier)

    def wap_branch(self, name: str) -> tuple[Branch, TableRef]:
        return wap_branch(self._root.catalog, name, self._root.settings.namespace)

    def branch_changes(self, table: TableRef, branch: str) -> BranchChanges:
        return self._root.reader.branch_changes(table, branch)

    def rows_on_main(self, table: TableRef) -> int | None:
        """The rows of `table` on main (None: not there), from its metadata (no Spark)."""
        return self._root.reader.row_count(table, self.main)

    def report(self, branch: str) -> dict[str, object] | None:
        """The audit report of the run that left `branch` open."""
        return self._root.reports.load(branch)

    def tables_on_main(self) -> list[TableRef]:
        return self._root.catalog.list_tables(self.main)

    def last_loads(self, tables: Sequence[TableRef]) -> dict[TableRef, HistoryEntry | None]:
        return last_loads(self._root.catalog, tables, main=self.main)

    def publish(self, branch: str, *, reason: str | None, actor: str, reaudit: bool) -> Decision:
        return self._root.publish(branch, reason=reason, actor=actor, reaudit=reaudit)

    def discard(self, branch: str, *, reason: str, actor: str) -> Decision:
        return self._root.discard(branch, reason=reason, actor=actor)

    def history(self, table: TableRef, limit: int = 100) -> list[HistoryEntry]:
        return self._root.history(table, limit)

    @cached_property
    def requests(self) -> PublishRequests:
        root = self._root

        def send(queue_url: str, request: PublishRequest) -> str:
            return SqsPublishRequests(builders.boto3_client("sqs", root.settings), queue_url).send(request)

        return PublishRequests(sign=lambda request: root.requesters.sign(request), send=send,
                               where=lambda request_id: root.results.uri(request_id),
                               wait=lambda request_id, seconds: root.results.wait(request_id, seconds))


@dataclass(frozen=True)
class DeadLetterCommands:
    """`wap dlq`: what the dead-letter queue holds (each listed message hidden a while), and sending it back."""

    peek: Callable[[int], list[DeadLetter]]
    redrive: Callable[[int], list[str]]


def dead_letter_commands_for(root: Service, dead_letter_url: str, queue_url: str) -> DeadLetterCommands:
    letters = SqsDeadLetters(builders.boto3_client("sqs", root.settings), dead_letter_url, queue_url)
    return DeadLetterCommands(peek=letters.peek, redrive=letters.redrive)
