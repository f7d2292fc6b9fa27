"""All errors the service raises. One base class; every message names the value and the fix.

Two families matter to callers:
- `BadInputError`: the file (or its key) is the problem. Retrying the same event will not help; the
  producer must fix the file. Event entry points report it and do not ask for redelivery.
- `InfrastructureError`: a component (Nessie, S3, Spark) failed. The event should be redelivered;
  `main` is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import TableRef


class WapError(Exception):
    """Base class of every error raised by wap-ingest."""


class ConfigError(WapError):
    """A setting is missing or invalid. The message names the variable and the fix."""


class AuditSuiteError(ConfigError):
    """The audits file is invalid. The message names the table, the check and the key."""


class BadInputError(WapError):
    """The source object cannot be ingested as it is; the producer must fix it."""

    table: TableRef | None = None  # the table the object was routed to, when routing knew it before refusing it

    def routed_to(self, table: TableRef) -> BadInputError:
        """This error, saying which table its object was for (its outcome and alert name it)."""
        self.table = table
        return self


class InvalidTableNameError(BadInputError):
    """An object key does not map to a valid table identifier."""


class UnsupportedFormatError(BadInputError):
    """The object is neither parquet nor CSV."""


class SourceNotFoundError(BadInputError):
    """The source object does not exist (deleted, or a wrong key)."""


class RefusedEventError(BadInputError):
    """The event names an object this service must not read: another bucket than the configured source
    bucket(s), or a key under a table the audits file does not list while `strict_tables: true`."""


class InvalidColumnError(BadInputError):
    """A column name the engine cannot address (`a.b`, a backtick, an empty name, two names differing only in
    case). The message names the column and the fix."""


class EmptySourceError(BadInputError):
    """The source object has no bytes or no rows."""


class UnreadableSourceError(BadInputError):
    """The source object could not be parsed as its format."""


class SchemaMismatchError(BadInputError):
    """The file's schema cannot be appended to the existing table."""


class SchemaDriftError(SchemaMismatchError):
    """The file's columns differ from the table's in a way the suite's schema policy does not allow."""

    def __init__(self, message: str, difference: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.difference = difference  # one line per column: "missing a (bigint)", "b: int -> string", "new c (string)"


class NotRegistrableError(BadInputError):
    """The table says `write: register` and the file cannot be registered as it is (the message says why)."""


class InfrastructureError(WapError):
    """A component failed; the event should be retried. `main` is untouched."""


class CatalogUnavailableError(InfrastructureError):
    """The Nessie server cannot be reached or answered with a server error."""


class ObjectStoreUnavailableError(InfrastructureError):
    """S3 cannot be reached or answered with a server error."""


class EngineError(InfrastructureError):
    """Spark failed for a reason that is not the input file."""


class EngineLostError(EngineError):
    """The engine's process (the Spark JVM or its Py4J gateway) died. The file is retried; the process builds a
    fresh engine for the next one instead of keeping the dead session."""


class UnexpectedError(InfrastructureError):
    """An exception that is not one of ours (an OSError, a ValueError, an SDK error that escaped its adapter),
    caught at the boundary of one file's run: that file is retried, its neighbours are not affected."""


class CatalogError(WapError):
    """A catalog operation was refused (not an outage)."""


class BranchNotFoundError(CatalogError):
    """The named branch does not exist."""


class BranchExistsError(CatalogError):
    """A branch with that name already exists."""


class MergeConflictError(CatalogError):
    """`main` moved and changed the same table since the branch was made; the merge was refused."""


class StaleHashError(CatalogError):
    """The expected hash of a reference is no longer its head."""


class DeferredError(WapError):
    """The file was not started in this invocation and goes back to the queue (not a failure: no alert)."""


class OutOfTimeError(DeferredError):
    """The invocation's remaining time is below the reserve a file needs: the file is handed back to the queue
    before it starts, rather than being cut off mid-merge."""


class OverBudgetError(DeferredError):
    """Staging the file would exceed what this invocation may hold on local disk (WAP_STAGING_BUDGET_BYTES):
    it goes back to the queue and runs in a later invocation."""
