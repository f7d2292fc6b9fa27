"""The last load published to each of many tables, from one read of main's history (`wap tables`).

Asking the catalog for each table's history makes the catalog scan main's whole history once per table (a filtered
read finds a table's few merges only by reading every commit): with hundreds of tables that took minutes. Here the
merges that published anything are read once, newest first, up to `WINDOW`; a table none of them names is looked up
on its own only when the window did not reach the start of the history.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import lineage
from .models import TableRef
from .ports import CatalogBranches
from .review import HistoryEntry, history_for, publication_entries

WINDOW = 5_000  # merges read in one pass (20 pages of Nessie's history)


def last_loads(catalog: CatalogBranches, tables: Iterable[TableRef], *, main: str,
               window: int = WINDOW) -> dict[TableRef, HistoryEntry | None]:
    """Each table's newest published load on `main` (None: never one), skipping maintenance merges."""
    wanted = {table.qualified: table for table in tables}
    found: dict[TableRef, HistoryEntry | None] = {}
    merges = catalog.publications(None, on=main, limit=window)
    for merge in merges:
        for name in lineage.tables_published(merge.properties):
            table = wanted.get(name)
            if table is not None and found.get(table) is None:
                found[table] = _first_load(publication_entries(merge, table))
    whole_history = len(merges) < window
    for table in wanted.values():
        if found.get(table) is None:
            found[table] = None if whole_history else _first_load(history_for(catalog, None, table, main=main,
                                                                               limit=20))
    return found


def _first_load(entries: Iterable[HistoryEntry]) -> HistoryEntry | None:
    return next((entry for entry in entries if entry.action == "published"), None)
