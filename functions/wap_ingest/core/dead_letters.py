"""The dead-letter queue's alarm, as the on-call engineer reads it: how many messages, since when, what to do."""

from __future__ import annotations

from dataclasses import dataclass

from .alerts import Action, ActionKind, Alert, AlertKind, mrkdwn_escape


@dataclass(frozen=True)
class QueueAlarm:
    """A CloudWatch alarm's state change, as SNS delivers it."""

    name: str
    state: str  # ALARM | OK | INSUFFICIENT_DATA
    reason: str
    queue: str | None  # the QueueName dimension
    changed_at: str


def alert_for_alarm(alarm: QueueAlarm) -> Alert | None:
    """An alert when the alarm fires (ALARM) or clears (OK); None for INSUFFICIENT_DATA."""
    queue = mrkdwn_escape(alarm.queue or "the dead-letter queue")
    name, since = mrkdwn_escape(alarm.name), mrkdwn_escape(alarm.changed_at)
    if alarm.state == "OK":
        return Alert(kind=AlertKind.MAINTENANCE, title=f":white_check_mark: {queue} is empty again",
                     summary=f"Alarm {name} is back to OK.", fields=(("Alarm", name), ("Since", since)))
    if alarm.state != "ALARM":
        return None
    return Alert(
        kind=AlertKind.INFRASTRUCTURE,
        title=f":rotating_light: messages in {queue}",
        summary=("Events failed every attempt and were dead-lettered: their files are not ingested. Each was "
                 "alerted on its first and last attempt; find the cause there, fix it, then replay them."),
        fields=(("Alarm", name), ("Queue", queue), ("Since", since)),
        details=(mrkdwn_escape(alarm.reason),),
        commands=(("See them", "wap dlq list"), ("Replay them (after the fix)", "wap dlq redrive")),
        actions=() if not alarm.queue else (
            Action(ActionKind.SHOW_DEAD_LETTERS, "Show", alarm.queue),
            Action(ActionKind.REDRIVE, "Redrive", alarm.queue, style="primary",
                   confirm="Send every message of the dead-letter queue back to the ingest queue? Do it once the "
                           "cause is fixed: published objects come out as duplicates."),
        ),
    )
