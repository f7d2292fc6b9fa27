"""What a large file's recorded job run needs, decided from its record and the engine's state: one pure decision for
every path that looks at a run (a redelivery of the file's event, EMR's state-change event, the scheduled sweep), so
they all take the same decision from the same record.

| the record | the engine says | verdict |
|---|---|---|
| marked exhausted (its last allowed run failed and was alerted) | - | EXHAUSTED: an operator acts |
| an outcome the job recorded (`final_state` SUCCESS) | - | DONE (even if the engine later says FAILED) |
| the job's own report of a failure (`final_state` FAILED) | - | FAILED |
| the job refused to run: its audits file was not the function's (`refused`) | - | REFUSED: resubmitted by the sweep
  or a redelivery, not at once by EMR's state-change event (the artefacts wait for `make emr-artifacts`) |
| no run yet (claimed, or a resubmission claimed) | - | UNSUBMITTED (STALE once older than `STALE_CLAIM`) |
| a run | FAILED, CANCELLED, or the run no longer exists | FAILED |
| a run | SUCCESS | DONE |
| a run | still going (SUBMITTED, PENDING, SCHEDULED, RUNNING, ...) | LIVE, or OVERDUE `OVERDUE_GRACE` after its limit |

The sweep's report (`SweepReport`) lists what it resubmitted, what it found exhausted, and the records it could not
judge (each its own error: one unreadable record never stops the others).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .job_failures import FAILED_STATES

SUCCEEDED = "SUCCESS"
DEFAULT_TIMEOUT_MINUTES = 720  # EMR Serverless's own limit for a run whose request set none
OVERDUE_GRACE = timedelta(hours=1)  # a run still going this long after its limit is stuck (EMR ends it at its limit)
STALE_CLAIM = timedelta(minutes=20)  # a claim with no run for longer than a function can live died half-way


class Verdict(enum.Enum):
    EXHAUSTED = "exhausted"
    DONE = "done"
    FAILED = "failed"
    REFUSED = "refused"
    OVERDUE = "overdue"
    LIVE = "live"
    UNSUBMITTED = "unsubmitted"
    STALE = "stale"  # claimed long ago and never submitted: the claimer died between the claim and the run


def recorded_verdict(record: Mapping[str, Any], now: datetime) -> Verdict | None:
    """The verdict the record alone gives; None when the engine must be asked (a run with no recorded end)."""
    if record.get("exhausted_at"):
        return Verdict.EXHAUSTED
    if record.get("final_state") == SUCCEEDED:
        return Verdict.DONE
    if record.get("final_state") == "FAILED" and record.get("job_run_id"):
        return Verdict.REFUSED if record.get("refused") else Verdict.FAILED
    if not record.get("job_run_id"):
        claimed = _time(record.get("resubmitted_at") or record.get("claimed_at"))
        return Verdict.STALE if claimed is None or now - claimed > STALE_CLAIM else Verdict.UNSUBMITTED
    return None


def engine_verdict(record: Mapping[str, Any], state: str, now: datetime) -> Verdict:
    """The verdict for a recorded run the engine reports in `state` (a vanished run: CANCELLED)."""
    if state in FAILED_STATES:
        return Verdict.FAILED
    if state == SUCCEEDED:
        return Verdict.DONE
    return Verdict.OVERDUE if overdue_by(record, now) is not None else Verdict.LIVE


def overdue_by(record: Mapping[str, Any], now: datetime) -> timedelta | None:
    """How long past its limit (and the grace) a still-going run is, or None when it is not."""
    submitted = _time(record.get("submitted_at"))
    if submitted is None:
        return None
    limit = timedelta(minutes=int(record.get("timeout_minutes") or DEFAULT_TIMEOUT_MINUTES))
    late = now - submitted - limit - OVERDUE_GRACE
    return late if late > timedelta(0) else None


def overdue_details(record: Mapping[str, Any], state: str, now: datetime) -> str:
    submitted = _time(record.get("submitted_at"))
    minutes = int((now - submitted).total_seconds() // 60) if submitted else 0
    limit = int(record.get("timeout_minutes") or DEFAULT_TIMEOUT_MINUTES)
    return (f"still {state} {minutes} minutes after its submission, past its limit of {limit} minutes (and "
            f"{int(OVERDUE_GRACE.total_seconds() // 60)} minutes' grace): cancelled by the sweep")


def _time(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Recovered:
    """A run the sweep acted on: resubmitted as `new_run`, or (None) found exhausted and alerted."""

    uri: str  # the object version's
    table: str
    failed_run: str
    state: str  # FAILED or CANCELLED (a run still going long past its limit is cancelled first)
    attempt: int  # the new run's attempt, or the last one's when exhausted
    new_run: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"object": self.uri, "table": self.table, "failed_run": self.failed_run, "state": self.state,
                "attempt": self.attempt, "new_run": self.new_run}


@dataclass(frozen=True)
class SweepReport:
    checked: int = 0  # records looked at
    resubmitted: tuple[Recovered, ...] = ()
    exhausted: tuple[Recovered, ...] = ()
    errors: tuple[str, ...] = ()  # a record the sweep could not judge or act on (it is tried again next time)

    def to_dict(self) -> dict[str, object]:
        return {"checked": self.checked, "resubmitted": [r.to_dict() for r in self.resubmitted],
                "exhausted": [r.to_dict() for r in self.exhausted], "errors": list(self.errors)}
