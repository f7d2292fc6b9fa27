"""What the audit knows of a table's past: the row counts of its last published loads (`row_count_vs_history`)."""

from __future__ import annotations

from . import lineage
from .audits import AuditContext, AuditSuite
from .maintenance import MAINTENANCE
from .models import TableRef
from .ports import CatalogBranches


def history_context(suite: AuditSuite, target: TableRef, catalog: CatalogBranches, main: str) -> AuditContext:
    """The row counts of the last published loads (a batch merge counts each of its files), read only if a check
    needs them."""
    if not suite.history_loads:
        return AuditContext()
    counts: list[int] = []
    # a maintenance's merge (`wap maintain`) published no load: skipped, with room for a few of them
    for publication in catalog.publications(target, on=main, limit=suite.history_loads + 8):
        if MAINTENANCE not in publication.properties:
            counts.extend(lineage.load_rows(publication.properties, target))
    return AuditContext(history=tuple(counts[: suite.history_loads]))
