"""A lone file's audit results recorded beside its data commit, not after it.

An engine that has measured a file's new rows before it commits them (the register path: its figures are the decoded
pages', the data file's metrics are made from them) hands the figures over through `WriteSpec.before_commit`, right
before its commit. They are audited then, as they will be after it, and `record_results` (the one owner of the
results) appends the audit's rows to the results table on the run's branch in a thread, while the engine commits the
data: two commits on the branch to two tables, which the catalog takes in either order. The run uses that audit when
the engine's answer carries the very figures it handed over (`took`): the results recorded are then those of the rows
committed, and the ledger's commit, which must be the branch's last, waits for the record (`settle`). Any other
answer (a rewrite, which measures after its commit, never hands any) is recorded after the commit as before; figures
handed over and then not answered mean the branch holds results of other rows, and the run fails (EngineError: the
branch is discarded, nothing is merged). A failed record is raised by `settle`, as record_results raises it.
"""

from __future__ import annotations

from collections.abc import Callable

from wap_ingest.core.audits import AuditContext, AuditSuite, audit
from wap_ingest.core.errors import EngineError
from wap_ingest.core.meanwhile import Meanwhile
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import AuditReport, SourceObject, TableRef

from .base import PipelineConfig, Ports, record_results


class ResultsBeside:
    def __init__(self, ports: Ports, config: PipelineConfig, suite: AuditSuite, table: TableRef, branch: str,
                 source: SourceObject, context: Callable[[], AuditContext]) -> None:
        self._ports, self._config, self._suite, self._context = ports, config, suite, context
        self._table, self._branch, self._source = table, branch, source
        self.measured: Measurements | None = None
        self.report: AuditReport | None = None
        self._record: Meanwhile[None] | None = None

    def start(self, measured: Measurements) -> None:
        """The engine's figures of the rows it is about to commit: audited now, their results recorded meanwhile."""
        if self._record is not None:
            raise EngineError(f"{self._source.uri}: the engine handed over the figures of {self._table}'s new rows "
                              f"twice in one commit")
        report = audit(self._suite, self._table, measured, self._context())
        self.measured, self.report = measured, report

        self._record = Meanwhile(lambda: record_results(self._ports, self._config, self._table, self._branch,
                                                        [(self._source, report, measured)]),
                                 f"results-{self._table.qualified}")  # its failure raised by `settle`

    @property
    def started(self) -> bool:
        return self._record is not None

    def took(self, measured: Measurements) -> bool:
        """Whether the results being recorded are those of `measured` (the very figures handed over)."""
        return self.measured is not None and self.measured is measured

    def settle(self, measured: Measurements | None) -> bool:
        """Wait for the record and raise its failure; whether it recorded `measured` (False: nothing was handed over,
        record after the commit). Raises EngineError when other figures were handed over than those answered."""
        if self._record is None:
            return False
        self._record()
        if measured is None or not self.took(measured):
            raise EngineError(f"{self._table} on {self._branch!r}: the audit results recorded beside the commit of "
                              f"{self._source.uri} are not those of the rows it committed; nothing was published.")
        return True

    def abandon(self) -> None:
        """Wait for the record, whatever became of it: the run is leaving its branch, and nothing of it may land there
        after (the transaction deletes the branch)."""
        if self._record is not None:
            self._record.wait()
