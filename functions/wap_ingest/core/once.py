"""Every action once: an action asked through the ingest queue (a click in Slack, an operator's publish request) is
recorded under its id before anything is done, and a delivery that finds it recorded does nothing and says so.

The queue delivers at least once, and a message can come back: SQS redelivers it (the same message id: a retry after
a failure, a batch whose invocation died, now and then a duplicate), a dead letter is sent back by hand or by `wap
dlq redrive`, and anyone who may send to the queue can send a copy of a body they saw (each of those is a new message
id). So the record names the action (`action_id`, chosen by what the action is: see adapters/slack/incoming.py and
core/publish_requests.py) and the message that claimed it, and says how far it got:

| found                                          | this delivery                                                  |
|------------------------------------------------|----------------------------------------------------------------|
| nothing                                        | claims it (one conditional write: of two claims, one wins), acts |
| claimed by another message                     | nothing: a copy (a replay, a redrive, a re-sent dead letter)    |
| done                                           | nothing: a redelivery of a message whose action finished       |
| started, not finished                          | nothing: the first delivery is still at it, or died during it   |
| failed (the action raised, to be retried)      | takes it over (a conditional change: one retry wins), acts      |

So an action runs at most once per message, and only the message that first named it may retry it. A delivery that
died in the middle of an action leaves it `started`: it is not run again (it may have done its work), and the person
or operator is told so by the next delivery; they can ask again (a new click, a new `wap publish`: a new id).
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import WapError

ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,99}")  # what every record store can use as a key, as it is
T = TypeVar("T")


class Progress(enum.StrEnum):
    STARTED = "started"  # claimed; the action runs, or the delivery running it died
    DONE = "done"  # finished (an answer, a refusal of the decision, a result): never again
    FAILED = "failed"  # raised to be retried: the same message's next delivery takes it over


@dataclass(frozen=True)
class ActionRecord:
    action_id: str
    message_id: str  # the delivery (SQS message id) that claimed the action
    progress: Progress
    what: str  # one line: the action, for the log and whoever reads the record
    at: str  # when it last changed (ISO 8601, UTC)
    version: str  # what a conditional change names (S3: the ETag)


class ActionRecords(ABC):
    """Where actions are recorded, each once (adapters/action_records.S3ActionRecords; tests/fake_actions.py)."""

    @abstractmethod
    def claim(self, action_id: str, message_id: str, what: str) -> tuple[ActionRecord, bool]:
        """Record the action as started by this message unless it is recorded already, in one conditional write:
        (the record as it is now, True when this call wrote it). `action_id` matches ACTION_ID (ValueError
        otherwise). An unreadable store raises InfrastructureError."""

    @abstractmethod
    def change(self, record: ActionRecord, progress: Progress) -> ActionRecord | None:
        """The record moved to `progress`, if nobody changed it since `record` was read; None when somebody did."""


def checked_id(action_id: str) -> str:
    if not ACTION_ID.fullmatch(action_id):
        raise ValueError(f"an action id is 1 to 100 letters, digits and dashes; got {action_id[:40]!r}")
    return action_id


class Seen(enum.StrEnum):
    """Why a delivery does nothing."""

    COPY = "copy"  # another message claimed the action first
    DONE = "done"  # this message's action finished
    RUNNING = "running"  # this message's action started and never said how it ended


@dataclass(frozen=True)
class Repeat:
    """A delivery that does nothing: the action was recorded before. `reason`: one line for the log and the answer."""

    record: ActionRecord
    seen: Seen
    reason: str


def start(records: ActionRecords, action_id: str, message_id: str, what: str) -> ActionRecord | Repeat:
    """The action claimed (or, after a failure, taken over) for this message; or why this delivery does nothing."""
    record, made = records.claim(checked_id(action_id), message_id, what)
    if made:
        return record
    since = f"{record.progress.value} at {record.at}"
    if record.message_id != message_id:
        return Repeat(record, Seen.COPY, f"{what} was first received as message {record.message_id} ({since}); this "
                                         f"copy (message {message_id}: a replay, a redrive or a re-sent dead letter) "
                                         f"did nothing")
    if record.progress is Progress.DONE:
        return Repeat(record, Seen.DONE, f"{what} was done ({since}); this redelivery of message {message_id} did "
                                         f"nothing")
    if record.progress is Progress.STARTED:
        return Repeat(record, Seen.RUNNING, f"{what} was started by an earlier delivery of message {message_id} "
                                            f"({since}), which is still at it or died before it ended; not started "
                                            f"again")
    taken = records.change(record, Progress.STARTED)
    if taken is None:
        return Repeat(record, Seen.RUNNING, f"{what}: another delivery of message {message_id} took over its retry; "
                                            f"this one did nothing")
    return taken


def once(records: ActionRecords, action_id: str, message_id: str, what: str, act: Callable[[], T],
         *, noted: Callable[[str], None] = lambda _line: None) -> T | Repeat:
    """Run `act` if this delivery may (`start`), recording how it ended: done when it returns, failed (so that
    this message's redelivery retries it) when it raises, the exception then raised on. `noted` hears of a record
    that could not be changed afterwards (the action's outcome stands: a redelivery finds it started and does
    nothing)."""
    started = start(records, action_id, message_id, what)
    if isinstance(started, Repeat):
        return started
    try:
        result = act()
    except Exception:
        _settle(records, started, Progress.FAILED, noted)
        raise
    _settle(records, started, Progress.DONE, noted)
    return result


def _settle(records: ActionRecords, record: ActionRecord, progress: Progress, noted: Callable[[str], None]) -> None:
    try:
        changed = records.change(record, progress)
    except WapError as exc:
        noted(f"{record.what}: its record could not be marked {progress.value} ({exc}); a redelivery does nothing")
        return
    if changed is None:
        noted(f"{record.what}: its record was changed by another delivery meanwhile; left as that one wrote it")
