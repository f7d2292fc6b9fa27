"""The action records in memory (core.once.ActionRecords): each claim and change conditional, as S3's If-None-Match
and If-Match make them in adapters/action_records.S3ActionRecords."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import UTC, datetime

from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.once import ActionRecord, ActionRecords, Progress, checked_id


class FakeActionRecords(ActionRecords):
    def __init__(self) -> None:
        self.records: dict[str, ActionRecord] = {}
        self.down = False  # True: every call fails as an unreachable store does
        self._versions = itertools.count(1)
        self._lock = threading.Lock()

    def _reachable(self) -> None:
        if self.down:
            raise InfrastructureError("the action records' store is down (fake)")

    def claim(self, action_id: str, message_id: str, what: str) -> tuple[ActionRecord, bool]:
        self._reachable()
        with self._lock:
            found = self.records.get(checked_id(action_id))
            if found is not None:
                return found, False
            made = ActionRecord(action_id, message_id, Progress.STARTED, what, _now(), str(next(self._versions)))
            self.records[action_id] = made
            return made, True

    def change(self, record: ActionRecord, progress: Progress) -> ActionRecord | None:
        self._reachable()
        with self._lock:
            found = self.records.get(record.action_id)
            if found is None or found.version != record.version:
                return None
            changed = replace(found, progress=progress, at=_now(), version=str(next(self._versions)))
            self.records[record.action_id] = changed
            return changed


def _now() -> str:
    return datetime.now(UTC).isoformat()
