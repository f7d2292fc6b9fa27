"""The AuditResults port's fake (tests/fakes.py re-exports it): results tables as the fake catalog's tables."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tests.fake_catalog import FakeCatalog
from wap_ingest.core.audit_results import ResultRow, results_table
from wap_ingest.core.models import TableRef
from wap_ingest.core.ports import AuditResults


class FakeAuditResults(AuditResults):
    """Results tables as the fake catalog's tables: a key per audited table, appended on a branch, merged with it."""

    def __init__(self, catalog: FakeCatalog) -> None:
        self.catalog = catalog
        self._ids = itertools.count(10_000)

    def record(self, branch: str, table: TableRef, rows: Sequence[ResultRow]) -> None:
        if not rows:
            return
        key = results_table(table).qualified
        existing = self.catalog.contents(branch).get(key)
        snapshots = [*(existing["snapshots"] if existing else []), (next(self._ids), list(rows), {})]
        self.catalog.commit(branch, {key: {"columns": (), "snapshots": snapshots}}, f"create or append {key}")

    def rows(self, table: TableRef, ref: str) -> list[ResultRow]:
        content = self.catalog.contents(ref).get(results_table(table).qualified)
        found = [row for _, rows, _ in content["snapshots"] for row in rows] if content else []
        return sorted(found, key=lambda r: r.recorded_at)
