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
from .models import IngestOutcome, OutcomeStatus, SourceObject, TableRef
from .pipeline import Load, PipelineConfig, Ports, Result, is_manifest, is_pending, route_or_result, run_routed, waiting
from .ports import EventSink, LargeFileJobs, Notifier
from .routing import Routed
from .weights import Weight

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
    results: dict[int, Result] = {}
    here: list[tuple[int, Routed]] = []
    loads: list[tuple[int, Item]] = []
    for index, item in enumerate(items):
        if item.table is None and is_pending(item.source.key):  # a load's file: its manifest ingests it
            results[index] = waiting(item.source)
            continue
        if item.table is None and is_manifest(item.source.key):
            loads.append((index, item))
            continue
        routed = route_or_result(item.source, ports=ports, suites=suites, config=config, table=item.table)
        if not isinstance(routed, Routed):
            results[index] = routed
        elif large_files is not None and routed.processed > large_files.threshold_bytes:
            results[index] = _submit(routed, large_files.jobs)
        else:
            here.append((index, routed))
    ran = run_routed([r for _, r in here], ports=ports, suites=suites, config=config, out_of_time=out_of_time)
    for (index, _), result in zip(here, ran, strict=True):
        results[index] = result
    for index, item in loads:
        try:
            results[index] = _load(item.source, Load(ports, suites, config, out_of_time), large_files)
        except Exception as exc:  # a bug must fail this load's message only
            log.exception("running the load %s", item.source.uri)
            results[index] = UnexpectedError(f"running the load {item.source.uri}: unexpected {type(exc).__name__}: "
                                             f"{exc}")
    return [results[i] for i in range(len(items))]


def item_for_job(source: SourceObject, table: TableRef, delivery: Delivery) -> Item:
    """What the distributed engine runs for an object the function submitted: a manifest runs its load (`table`, the
    load's first table, only says where the run is recorded), any other file goes into the table it was routed to."""
    return Item(source, delivery, None if is_manifest(source.key) else table)


def _load(manifest: SourceObject, load: Load, large_files: LargeFiles | None) -> Result:
    """A multi-table load: here, or, when its files together are above the large-file threshold, on the distributed
    engine (the job runs the same load; its record is kept under the load's first table)."""
    prepared = load.prepare(manifest)
    if not isinstance(prepared, tuple):
        return prepared
    head, routed = prepared
    if large_files is not None and sum(r.processed for r in routed) > large_files.threshold_bytes:
        first = min((r.table for r in routed), key=lambda t: t.qualified)
        weight = Weight(sum(r.source.size or 0 for r in routed), sum(r.processed for r in routed), "its files")
        return _submit(Routed(head, first, routed[0].fmt, weight=weight), large_files.jobs)
    return load.run_prepared(head, routed)


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
