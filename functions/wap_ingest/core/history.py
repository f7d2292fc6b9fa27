"""What the audit knows of a table's past: the row counts of its last published loads (`row_count_vs_history`, from
the merges' lineage) and the metrics of its last published loads (anomaly checks, from its audit results table on
`main`: core.audit_results).

`history_beside` reads it in a thread while the run writes the new rows (the audit needs it only once they are
measured): its answer waits for the read and raises what the read raised, so the history costs the audit only what
the write did not cover.
"""

from __future__ import annotations

from collections.abc import Callable

from . import lineage
from .audits import AuditContext, AuditSuite
from .maintenance import MAINTENANCE
from .meanwhile import Meanwhile
from .models import TableRef
from .ports import AuditResults, CatalogBranches


def history_context(suite: AuditSuite, target: TableRef, catalog: CatalogBranches, main: str,
                    results: AuditResults | None = None) -> AuditContext:
    """The row counts of the last published loads (a batch merge counts each of its files) and the metric history
    the anomaly checks need, each read only if a check needs it (no results kept: no metric history, and every
    anomaly check passes, saying it has no loads yet)."""
    wanted = suite.history_metrics
    metrics = results.history(target, main, wanted) if results is not None and wanted else {}
    if not suite.history_loads:
        return AuditContext(metrics=metrics)
    counts: list[int] = []
    # a maintenance's merge (`wap maintain`) published no load: skipped, with room for a few of them
    for publication in catalog.publications(target, on=main, limit=suite.history_loads + 8):
        if MAINTENANCE not in publication.properties:
            counts.extend(lineage.load_rows(publication.properties, target))
    return AuditContext(history=tuple(counts[: suite.history_loads]), metrics=metrics)


def history_beside(suite: AuditSuite, target: TableRef, catalog: CatalogBranches, main: str,
                   results: AuditResults | None = None) -> Callable[[], AuditContext]:
    """`history_context` read in a thread started now; the call returned waits for it (nothing to read: no thread)."""
    if not suite.history_loads and not (results is not None and suite.history_metrics):
        return AuditContext
    return Meanwhile(lambda: history_context(suite, target, catalog, main, results), f"history-{target.qualified}")
