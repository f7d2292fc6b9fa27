"""What a run hands the transaction (transaction.py): its work (the tables, the object versions, the writing and
auditing on a branch), the guards it runs under, and its verdict (publish a merge, keep the branch for review, or
discard it); and how the transaction ended."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from wap_ingest.core import ledger
from wap_ingest.core.branches import RunKind
from wap_ingest.core.errors import OutOfTimeError, OverBudgetError
from wap_ingest.core.models import Branch, SourceObject, TableRef


@dataclass(frozen=True)
class Loaded:
    """One object version a merge publishes into one table: its identity and URI, and the rows it adds."""

    table: TableRef
    identity: str
    uri: str
    rows: int

    @classmethod
    def of(cls, table: TableRef, source: SourceObject, rows: int) -> Loaded:
        return cls(table, source.identity, source.uri, rows)


@dataclass(frozen=True)
class Merge:
    """What a merge into main publishes: the object versions (their ledger entries), the commit's message and
    properties (core.lineage)."""

    files: tuple[Loaded, ...]
    message: str
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Publish:
    merge: Merge


@dataclass(frozen=True)
class Keep:
    merge: Merge  # what publishing the branch after review will merge


@dataclass(frozen=True)
class Discard:
    pass


Verdict = Publish | Keep | Discard


@dataclass(frozen=True)
class Ended:
    """How a transaction ended: `status` is published, kept, discarded or "on main" (the work's versions were
    published before: no branch was made)."""

    status: str
    attempts: int
    branch: str | None = None
    merged_hash: str | None = None
    note: str = ""  # what could not be cleaned up (for the outcome's message)


class Work(ABC):
    """One run's work, handed to the transaction: what it is about, and the writing and auditing on a branch."""

    kind: RunKind

    @abstractmethod
    def tables(self) -> Sequence[TableRef]:
        """The tables it writes, the one that names the branch first."""

    @abstractmethod
    def about(self) -> str:
        """What the branch's digest stands for (an object version's identity, a group's, a manifest's...)."""

    def results(self) -> Sequence[TableRef]:
        """The audit results tables it may write (core.audit_results): named in its plan, their namespace made on
        its branch when main lacks it."""
        return ()

    def versions(self) -> Mapping[TableRef, Sequence[SourceObject]]:
        """The object versions it would publish, looked up in the ledger on main before each attempt."""
        return {}

    def on_main(self, found: Mapping[str, ledger.LedgerEntry], note: str) -> bool:
        """Some versions are on main already (`found`, by identity; `note`: their left-over attempts' clean-up):
        settle them; True when nothing is left to do."""
        raise NotImplementedError(f"{type(self).__name__} publishes no object version")

    @abstractmethod
    def run(self, branch: Branch, attempt: int) -> Verdict:
        """Write and audit on `branch`; the verdict. Raises a BadInputError when the input is the problem, a
        WapError for infrastructure failures (the branch is deleted either way)."""


@dataclass(frozen=True)
class Guards:
    """What an invocation may still do: time left and local disk. Checked before every attempt and before files
    are staged; raising a DeferredError hands the work back to the queue, not started (no alert)."""

    out_of_time: Callable[[], bool] = lambda: False
    free_bytes: Callable[[], int] | None = None

    def check_time(self, what: str) -> None:
        if self.out_of_time():
            raise OutOfTimeError(f"{what}: not started, the invocation is nearly out of time; deferred to a later "
                                 f"invocation (a file's message goes back to the queue).")

    def check_disk(self, what: str, needed: int) -> None:
        """`needed`: the staged files and the engine's scratch for what they inflate to (Routed.local_bytes)."""
        if needed and self.free_bytes is not None and needed > self.free_bytes():
            raise OverBudgetError(f"{what}: not started, staging it now would exceed the free local disk; back to "
                                  f"the queue (it runs in a later invocation).")
