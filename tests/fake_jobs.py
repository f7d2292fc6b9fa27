"""EMR Serverless in memory (the LargeFileJobs port), as adapters/aws/emr.py behaves: tests/fakes.py re-exports it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from wap_ingest.core.job_failures import JobRunsExhaustedError
from wap_ingest.core.job_sweep import Recovered, SweepReport
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs


class FakeJobs(LargeFileJobs):
    """EMR Serverless in memory, as EmrServerlessJobs: one run per object version and table, newest first; a run that
    died (`end`) or is stuck past its limit (`stall`) is resubmitted by the next delivery, `run_ended` or `sweep`,
    whichever comes first (the others find the new run), up to `max_attempts` runs; then it is exhausted, marked once
    (the one that marks it raises, or for the sweep reports it), as the adapter's record does."""

    def __init__(self, max_attempts: int = 3) -> None:
        self.started: dict[tuple[str, str], JobRun] = {}  # (table, object version) -> its latest run
        self.attempts: dict[tuple[str, str], int] = {}  # (table, object version) -> runs started
        self.sources: dict[tuple[str, str], SourceObject] = {}
        self.stalled: set[str] = set()  # run ids still "RUNNING" long past their limit
        self.exhausted: set[tuple[str, str]] = set()
        self.refuse: Exception | None = None  # the engine refuses the next submissions with it
        self.max_attempts = max_attempts
        self._count = 0

    def end(self, run: JobRun, state: str = "FAILED") -> None:
        """The engine ends a run without an outcome (driver lost, out of memory, timeout: FAILED; CANCELLED)."""
        for key, found in self.started.items():
            if found.job_run_id == run.job_run_id:
                self.started[key] = replace(found, state=state)

    def stall(self, run: JobRun) -> None:
        """The run is still RUNNING long past its limit (EMR should have ended it)."""
        self.end(run, "RUNNING")
        self.stalled.add(run.job_run_id)

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        key = (table.qualified, source.identity)
        if key not in self.started:
            return self._start(key, source)
        recovered, run = self._settle(key)
        if key in self.exhausted:
            raise JobRunsExhaustedError(f"EMR job runs for {source.uri} into {table} failed {self.attempts[key]} "
                                        "time(s), the most allowed; not resubmitted again")
        return run if recovered is not None else replace(run, already_submitted=True)

    def run_ended(self, application_id: str, job_run_id: str) -> JobRun | None:
        key = next((k for k, r in self.started.items() if r.job_run_id == job_run_id), None)
        if key is None or key in self.exhausted:
            return None  # not a recorded run (or a superseded one), or alerted already
        recovered, run = self._settle(key)
        if recovered is not None and recovered.new_run is None:
            raise JobRunsExhaustedError(f"EMR job runs for {run.source.uri} failed {self.attempts[key]} time(s)")
        return run if recovered is not None else None

    def sweep(self) -> SweepReport:
        resubmitted, exhausted = [], []
        for key in list(self.started):
            if key in self.exhausted:
                continue
            recovered, _ = self._settle(key)
            if recovered is not None:
                (resubmitted if recovered.new_run else exhausted).append(recovered)
        return SweepReport(len(self.started), tuple(resubmitted), tuple(exhausted))

    def _settle(self, key: tuple[str, str]) -> tuple[Recovered | None, JobRun]:
        run = self.started[key]
        if run.state not in ("FAILED", "CANCELLED") and run.job_run_id not in self.stalled:
            return None, run
        failed = Recovered(run.source.uri, run.table, run.job_run_id,
                           "CANCELLED" if run.job_run_id in self.stalled else run.state, self.attempts[key])
        if self.attempts[key] >= self.max_attempts:
            self.exhausted.add(key)
            return failed, run
        new = self._start(key, self.sources[key])
        return replace(failed, attempt=self.attempts[key], new_run=new.job_run_id), new

    def _start(self, key: tuple[str, str], source: SourceObject) -> JobRun:
        if self.refuse is not None:
            raise self.refuse
        self._count += 1
        run = JobRun(f"fake-run-{self._count:06d}", "app-fake", SourceObject(source.bucket, source.key),
                     key[0], "SUBMITTED", datetime.now(UTC).isoformat(timespec="microseconds"))
        self.started[key], self.sources[key] = run, source
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return run

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        mine = [r for r in self.started.values() if table is None or r.table == table.qualified]
        return sorted(mine, key=lambda r: r.submitted_at, reverse=True)
