"""The exactly-once ledger: the record that an object version was published into a table, kept in the catalog.

One catalog entry per (table, object version), under the reserved namespace `wap_ledger`, at a key derived from
both (`ledger_key`). The pipeline commits the entries on the WAP branch just before the merge, so the data and its
record reach `main` in one atomic merge; a concurrent run that publishes the same version conflicts on the table
both changed (Nessie merges namespace entries without conflict checks, so the table's key is what serializes them)
and retries from main, where it finds the entry (DUPLICATE). Lookups read the keys directly: one catalog
request for any number of identities, whatever the length of the table's history, no engine job. Nothing that
cleans tables (compaction, snapshot expiry, Nessie GC of files) touches these entries: they hold no files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .models import SourceObject, TableRef

LEDGER_NAMESPACE = "wap_ledger"  # reserved: core.naming refuses it as a table's namespace
_PREFIX = "wap.ledger."
_FIELDS = ("table", "identity", "source", "rows", "branch", "recorded_at")


@dataclass(frozen=True)
class LedgerEntry:
    """One object version published into one table: its URI, its rows, the WAP branch that carried it, when."""

    table: str  # qualified, `<namespace>.<table>`
    identity: str
    source: str
    rows: int
    branch: str
    recorded_at: str  # ISO-8601, UTC

    @property
    def key(self) -> str:
        return ledger_key(self.table, self.identity)

    def properties(self) -> dict[str, str]:
        """The entry as the catalog stores it (string properties)."""
        return {f"{_PREFIX}{name}": str(getattr(self, name)) for name in _FIELDS}


def ledger_key(table: str, identity: str) -> str:
    """The entry's name inside LEDGER_NAMESPACE for a table (qualified name) and an identity: a digest of both (a
    fixed-size, SQL- and path-safe name whatever the object key holds)."""
    return hashlib.sha256(f"{table}\n{identity}".encode()).hexdigest()


def entry_from(properties: Mapping[str, str]) -> LedgerEntry | None:
    """The entry stored in these properties, or None when they are not a ledger entry (or are damaged)."""
    values = {name: properties.get(f"{_PREFIX}{name}") for name in _FIELDS}
    if any(v is None for v in values.values()):
        return None
    try:
        rows = int(str(values["rows"]))
    except ValueError:
        return None
    return LedgerEntry(table=str(values["table"]), identity=str(values["identity"]), source=str(values["source"]),
                       rows=rows, branch=str(values["branch"]), recorded_at=str(values["recorded_at"]))


def entries_for(table: TableRef, loaded: Sequence[tuple[SourceObject, int]], branch: str, at: float
                ) -> list[LedgerEntry]:
    """The entries of one publication: each object version with the rows it added."""
    return [entry_for(table, source.identity, source.uri, rows, branch, at) for source, rows in loaded]


def entry_for(table: TableRef, identity: str, source: str, rows: int, branch: str, at: float) -> LedgerEntry:
    """The entry of one object version (`source`: its URI) published into `table` by `branch` (`at`: seconds since
    the epoch), with the rows it added."""
    when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    return LedgerEntry(table=table.qualified, identity=identity, source=source, rows=rows, branch=branch,
                       recorded_at=when)


def matching(table: TableRef, found: Mapping[str, Mapping[str, str]], identities: Sequence[str]
             ) -> dict[str, LedgerEntry]:
    """From the properties found under each key, the entries of these identities in this table (a digest
    collision, or a damaged entry, is not a match)."""
    result: dict[str, LedgerEntry] = {}
    for identity in identities:
        props = found.get(ledger_key(table.qualified, identity))
        entry = entry_from(props) if props is not None else None
        if entry is not None and entry.identity == identity and entry.table == table.qualified:
            result[identity] = entry
    return result
