"""EventBridgeSink: the EventSink port on an EventBridge bus (boto3 `events`, PutEvents in chunks of 10)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws.errors import EVENTBRIDGE, aws_error
from wap_ingest.core.downstream import SOURCE
from wap_ingest.core.errors import InfrastructureError
from wap_ingest.core.ports import DownstreamEvent, EventSink

_PER_CALL = 10  # PutEvents takes at most 10 entries


class EventBridgeSink(EventSink):
    def __init__(self, client: Any, bus: str, source: str = SOURCE) -> None:
        self._events, self._bus, self._source = client, bus, source

    def publish(self, events: Sequence[DownstreamEvent]) -> None:
        for start in range(0, len(events), _PER_CALL):
            entries = [{"Source": self._source, "DetailType": e.detail_type, "EventBusName": self._bus,
                        "Detail": json.dumps(dict(e.detail), default=str)} for e in events[start:start + _PER_CALL]]
            try:
                answer = self._events.put_events(Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                raise aws_error(exc, service=EVENTBRIDGE, doing=f"sending {len(entries)} event(s) to",
                                resource=f"bus {self._bus}", setting="WAP_EVENT_BUS") from exc
            if answer.get("FailedEntryCount"):
                failed = [e.get("ErrorCode") for e in answer.get("Entries", []) if e.get("ErrorCode")]
                raise InfrastructureError(f"EventBridge bus {self._bus} did not accept {answer['FailedEntryCount']} of "
                                          f"{len(entries)} event(s): {', '.join(map(str, failed))}")
