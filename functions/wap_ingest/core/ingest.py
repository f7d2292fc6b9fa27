"""The use case every entry point calls: route each object once (refuse, the function, or EMR Serverless), run the
pipeline for the rest, and tell the operator by the alert policy of core/deliveries.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .audits import AuditSuites
from .deliveries import UNKNOWN_DELIVERY, Delivery, Item, notify, retry_delay_seconds
from .downstream import announce
from .errors import UnexpectedError, WapError
from .manifests import is_manifest
from .models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from .pipeline import Load, PipelineConfig, Ports, Result, router_for, run_routed
from .ports import EventSink, LargeFileJobs, Notifier
from .routing import Routed, Where

log = logging.getLogger(__name__)

__all__ = ["UNKNOWN_DELIVERY", "Delivery", "Item", "LargeFiles", "ingest", "item_for_job", "notify",
           "retry_delay_seconds"]


@dataclass(frozen=True)
class LargeFiles:
    """Where files above `threshold_bytes` go instead of the function (None in the EMR job itself)."""

    jobs: LargeFileJobs
    threshold_bytes: int


def ingest(
    items: Sequence[Item],
    *,
    ports: Ports,
    suites: AuditSuites,
    config: PipelineConfig,
    notifier: Notifier,
    large_files: LargeFiles | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
    events: EventSink | None = None,
) -> list[Result]:
    """One result per item, in order: route each object (its size from the store), hand the large ones to the
    distributed engine, run the others through the pipeline, alert per object, and send the downstream events."""
    ordered = _run(items, ports=ports, suites=suites, config=config, large_files=large_files, out_of_time=out_of_time)
    for item, result in zip(items, ordered, strict=True):
        notify(result, item.source, item.delivery, notifier)
    announce(ordered, events)
    return ordered


def _run(items: Sequence[Item], *, ports: Ports, suites: AuditSuites, config: PipelineConfig,
         large_files: LargeFiles | None, out_of_time: Callable[[], bool]) -> list[Result]:
    """Each item placed by routing's one place (core.routing.Router.place: the function, EMR or refuse), then the
    files placed here run together (grouped by table) and each load here on its own."""
    router = router_for(ports, suites, config, None if large_files is None else large_files.threshold_bytes)
    results: dict[int, Result] = {}
    here: list[tuple[int, Routed]] = []
    loads: list[tuple[int, Routed, tuple[Routed, ...]]] = []
    for index, item in enumerate(items):
        placed = router.place(item.source, item.table)
        if placed.routed is None:  # refused: its INVALID or WAITING outcome, or the error to retry
            assert placed.result is not None
            results[index] = placed.result
        elif placed.where is Where.EMR:
            assert large_files is not None  # routing sends nothing to EMR without its threshold
            results[index] = _submit(placed.routed, large_files.jobs)
        elif placed.files:
            loads.append((index, placed.routed, placed.files))
        else:
            here.append((index, placed.routed))
    ran = run_routed([r for _, r in here], ports=ports, suites=suites, config=config, out_of_time=out_of_time)
    for (index, _), result in zip(here, ran, strict=True):
        results[index] = result
    for index, load, files in loads:
        try:
            results[index] = Load(ports, suites, config, out_of_time).run_prepared(load.source, list(files))
        except Exception as exc:  # a bug must fail this load's message only
            log.exception("running the load %s", load.source.uri)
            results[index] = UnexpectedError(f"running the load {load.source.uri}: unexpected {type(exc).__name__}: "
                                             f"{exc}")
    return [results[i] for i in range(len(items))]


def item_for_job(source: SourceObject, table: TableRef, delivery: Delivery) -> Item:
    """What the distributed engine runs for an object the function submitted: a manifest runs its load (`table`, the
    load's first table, only says where the run is recorded), any other file goes into the table it was routed to."""
    return Item(source, delivery, None if is_manifest(source.key) else table)


def _submit(routed: Routed, jobs: LargeFileJobs) -> Result:
    """Hand a file too large for the function to the distributed engine, which runs the same pipeline (and
    alerts on its outcome)."""
    source = routed.source
    try:
        run = jobs.submit(source, routed.table)
    except WapError as exc:
        return exc
    except Exception as exc:
        log.exception("submitting %s", source.uri)
        return UnexpectedError(f"submitting {source.uri} to EMR Serverless: unexpected {type(exc).__name__}: {exc}")
    again = " (already submitted by an earlier delivery; not started twice)" if run.already_submitted else ""
    log.info("large file %s submitted as job run %s%s", source.uri, run.job_run_id, again,
             extra={"object_key": source.key, "job_run_id": run.job_run_id})
    return IngestOutcome(
        source=source, status=OutcomeStatus.SUBMITTED, table=routed.table.qualified,
        message=f"{routed.processed} bytes to process ({source.size} stored): running on EMR Serverless as job run "
        f"{run.job_run_id} "
        f"(application {run.application_id}){again}",
    )
