"""Downstream events: what happened to each object, for the jobs that consume the lake (issue 16, item 3).

Every outcome that changes or settles what readers see becomes one event on the configured bus (WAP_EVENT_BUS;
none when unset), source `wap-lake`: `Table Published` (the merge hash says which commit of `main` holds the rows),
`File Rejected` (the audit failed: the branch is kept), `File Invalid` (the file cannot be ingested as it is).
Duplicates, deferrals, submissions to EMR (the job announces its own outcome) and failures (retried) send nothing.
Sending is best effort: a failure is logged and never changes an outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .models import IngestOutcome, OutcomeStatus
from .ports import DownstreamEvent, EventSink

log = logging.getLogger(__name__)

SOURCE = "wap-lake"
TABLE_PUBLISHED = "Table Published"
FILE_REJECTED = "File Rejected"
FILE_INVALID = "File Invalid"
LOAD_PUBLISHED = "Load Published"  # a multi-table manifest (one merge for every table)
_TYPES = {OutcomeStatus.PUBLISHED: TABLE_PUBLISHED, OutcomeStatus.REJECTED: FILE_REJECTED,
          OutcomeStatus.INVALID: FILE_INVALID}


def event_for(outcome: IngestOutcome) -> DownstreamEvent | None:
    detail_type = _TYPES.get(outcome.status)
    if detail_type is None:
        return None
    if outcome.parts and outcome.status is OutcomeStatus.PUBLISHED:
        detail_type = LOAD_PUBLISHED
    sources = [outcome.source, *(part.source for part in outcome.parts)]  # a load: its manifest, then its files
    tables = list(dict.fromkeys(p.table for p in outcome.parts if p.table)) if outcome.parts else \
        ([outcome.table] if outcome.table else [])
    detail: dict[str, object] = {
        "status": outcome.status.value,
        "tables": tables,
        "objects": [s.uri for s in sources],
        "object_versions": [{"uri": s.uri, "etag": s.etag, "version_id": s.version_id} for s in sources],
        "rows": outcome.rows,
        "branch": outcome.branch,
        "merged_hash": outcome.merged_hash,
    }
    if outcome.status is not OutcomeStatus.PUBLISHED:
        detail["message"] = outcome.message
    if outcome.quarantined is not None:
        detail["quarantined"] = outcome.quarantined.to_dict()
    if outcome.report is not None and not outcome.report.passed:
        detail["failed_checks"] = [f"{c.check}({c.target})" for c in outcome.report.failures]
    return DownstreamEvent(detail_type, detail)


def announce(outcomes: Sequence[object], sink: EventSink | None) -> None:
    """Send the events of these results (outcomes; errors send nothing). Never raises."""
    if sink is None:
        return
    events = [e for e in (event_for(o) for o in outcomes if isinstance(o, IngestOutcome)) if e is not None]
    if not events:
        return
    try:
        sink.publish(events)
    except Exception:
        log.exception("%d downstream event(s) could not be sent (the outcomes stand): %s", len(events),
                      ", ".join(f"{e.detail_type} {e.detail.get('objects')}" for e in events))
