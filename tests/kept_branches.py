"""Branches kept for review on the fake catalog, made as the service makes them: by the transaction
(core.pipeline.transaction), from a run whose audit failed, so each carries its run's recorded plan."""

from __future__ import annotations

from collections.abc import Sequence

from tests.fake_catalog import FakeCatalog
from wap_ingest.core import lineage
from wap_ingest.core.branches import RunKind
from wap_ingest.core.models import Branch, SourceObject, TableRef
from wap_ingest.core.pipeline import Loaded, Merge, PipelineConfig, Transactions
from wap_ingest.core.pipeline.transaction import Keep, Verdict, Work


class Rejected(Work):
    """A run of one file (or a load's files) whose audit failed: its rows appended on the branch, then kept."""

    def __init__(self, catalog: FakeCatalog, files: Sequence[tuple[TableRef, SourceObject, int]], kind: RunKind
                 ) -> None:
        self.catalog, self.files, self.kind = catalog, list(files), kind

    def tables(self) -> Sequence[TableRef]:
        return sorted({t for t, _, _ in self.files}, key=lambda t: t.qualified)

    def about(self) -> str:
        return self.files[0][1].identity

    def run(self, branch: Branch, attempt: int) -> Verdict:
        for table, source, rows in self.files:
            old = self.catalog.contents(branch.name).get(table.qualified) or {"columns": ("c",), "snapshots": []}
            self.catalog.commit(branch.name, {table.qualified: {"columns": old["columns"], "snapshots": [
                *old["snapshots"], {"rows": [{"c": None}] * rows, "props": lineage.source_properties(source)}]}},
                f"append {source.uri}", lineage.source_properties(source))
        if len(self.files) == 1:
            table, source, rows = self.files[0]
            properties = lineage.merge_properties(table, [(source, rows)])
        else:
            properties = lineage.load_properties(SourceObject("inbox", "_loads/l.json", etag="m1"),
                                                 [(s, t, n) for t, s, n in self.files])
        merge = Merge(tuple(Loaded.of(t, s, n) for t, s, n in self.files),
                      f"wap: publish {len(self.files)} file(s)", properties)
        return Keep(merge)


def keep_for_review(catalog: FakeCatalog, files: Sequence[tuple[TableRef, SourceObject, int]], *,
                    name: str | None = None, default_namespace: str = "wap") -> str:
    """A branch the transaction kept after its run's audit failed (a load's when several files are given); renamed
    to `name` when given (a fixed name for the test: the same commits, the same base)."""
    kind = RunKind.FILE if len(files) == 1 else RunKind.LOAD
    config = PipelineConfig(default_namespace=default_namespace, sleep=lambda _s: None)
    ended = Transactions(catalog, config).run(Rejected(catalog, files, kind))
    assert ended.status == "kept" and ended.branch is not None, ended
    if name is None:
        return ended.branch
    head = catalog.reference_hash(ended.branch)
    catalog.create_branch(name, head)
    catalog.bases[name] = catalog.bases[ended.branch]
    catalog.delete_branch(Branch(ended.branch, head))
    return name
