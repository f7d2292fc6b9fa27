"""WAP for a burst of small files: the files of one table in one delivery share one branch, one write, one
snapshot and one merge, while each file keeps its own fate.

For the files of one table (after routing, as in `run_wap`):
1. one metadata read on main answers which of them are already published (DUPLICATE);
2. the engine reads the others together and measures each file's rows in one pass; the core audits each
   file (the `accept` callback) and the engine appends the accepted ones to a fresh branch in one snapshot
   that carries every file's identity (exactly-once stays per file);
3. the core checks that the snapshot holds exactly the rows it audited, then merges the branch once.
A file the engine cannot read with the others, or whose audit fails, then runs alone through `run_wap`: it
gets a branch of its own (a rejected file's branch holds only its rows) and its own INVALID or REJECTED
outcome. A merge conflict restarts the group from main, like `run_wap`; an infrastructure failure fails the
group's files that were not settled, and their messages are retried.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from .audits import AuditSuites, audit
from .errors import (
    BadInputError,
    BranchExistsError,
    BranchNotFoundError,
    EngineError,
    MergeConflictError,
    OutOfTimeError,
    StaleHashError,
    WapError,
)
from .models import (
    AuditReport,
    Branch,
    FileFormat,
    IngestOutcome,
    Measurements,
    OutcomeStatus,
    SourceObject,
    TableRef,
)
from .naming import BRANCH_PREFIX, format_for_key, table_for_key
from .pipeline import (
    SOURCE_PROPERTY_PREFIX,
    PipelineConfig,
    Ports,
    discard_quietly,
    duplicate_outcome,
    history_context,
    run_wap,
    with_version,
)
from .ports import BatchTableWriter
from .stopwatch import Stopwatch

log = logging.getLogger(__name__)

IDENTITY_KEY = f"{SOURCE_PROPERTY_PREFIX}identity"  # + ".<n>" on a batch snapshot
ROWS_KEY = f"{SOURCE_PROPERTY_PREFIX}rows"  # + ".<n>": that file's rows in the batch snapshot
SOURCES_PROPERTY = "wap.sources"  # on a batch merge commit: JSON list of the files it published

Result = IngestOutcome | WapError


@dataclass(frozen=True)
class _Item:
    index: int
    source: SourceObject
    fmt: FileFormat


def batch_snapshot_properties(files: Sequence[tuple[SourceObject, int]]) -> dict[str, str]:
    """Each file's identity and rows, numbered, on the one snapshot: `find_appends` finds every file by it."""
    props: dict[str, str] = {}
    for n, (source, rows) in enumerate(files):
        props[f"{IDENTITY_KEY}.{n}"] = source.identity
        props[f"{ROWS_KEY}.{n}"] = str(rows)
    return props


def batch_merge_properties(table: TableRef, files: Sequence[tuple[SourceObject, int]]) -> dict[str, str]:
    """The merge commit of a batch: what `wap history` shows, one entry per published file."""
    sources = [{"bucket": s.bucket, "key": s.key, "identity": s.identity, "rows": rows} for s, rows in files]
    return {"wap.table": table.qualified, "wap.rows": str(sum(rows for _, rows in files)),
            "wap.files": str(len(files)), SOURCES_PROPERTY: json.dumps(sources, separators=(",", ":"))}


def batch_branch_name(table: TableRef, sources: Sequence[SourceObject], attempt: int) -> str:
    """`wap-<ns>-<table>-<digest of the batch>-b<attempt>`: parses like a file's branch (table_from_branch)."""
    digest = hashlib.sha256("\n".join(sorted(s.identity for s in sources)).encode("utf-8")).hexdigest()[:16]
    return f"{BRANCH_PREFIX}-{table.namespace}-{table.name}-{digest}-b{attempt:07d}"


def run_batch(
    sources: Sequence[SourceObject],
    *,
    ports: Ports,
    batch_writer: BatchTableWriter,
    suites: AuditSuites,
    config: PipelineConfig,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[Result]:
    """One result per source, in order: its outcome, or the WapError that failed it (to be retried).

    `out_of_time` is asked before each table's group and each file run alone: once it says yes, the files not
    started get an OutOfTimeError (their messages go back to the queue) instead of being cut off mid-merge."""
    results: dict[int, Result] = {}
    stop = _Stop(out_of_time)
    groups: dict[TableRef, list[_Item]] = {}
    for index, source in enumerate(sources):
        try:
            target = table_for_key(source.key, default_namespace=config.default_namespace, bucket=source.bucket)
            fmt = format_for_key(source.key, bucket=source.bucket)
        except BadInputError:
            results[index] = _alone(source, ports, suites, config, stop)  # run_wap says why, in its words
            continue
        groups.setdefault(target, []).append(_Item(index, source, fmt))
    for target, items in groups.items():
        if suites.suite_for(target).plan().existing_keys:
            # "unique against main": each file must see the files published before it, so they go one by one
            results.update({i.index: _alone(i.source, ports, suites, config, stop) for i in items})
        elif len(items) == 1:
            results[items[0].index] = _alone(items[0].source, ports, suites, config, stop)
        elif stop():
            results.update({i.index: stop.error(i.source) for i in items})
        else:
            results.update(_run_group(target, items, ports, batch_writer, suites, config, stop))
    return [results[i] for i in range(len(sources))]


class _Stop:
    def __init__(self, out_of_time: Callable[[], bool]) -> None:
        self._out_of_time = out_of_time
        self._stopped = False

    def __call__(self) -> bool:
        self._stopped = self._stopped or self._out_of_time()
        return self._stopped

    @staticmethod
    def error(source: SourceObject) -> OutOfTimeError:
        return OutOfTimeError(f"{source.uri}: not started, the invocation is nearly out of time; back to the queue.")


def _alone(source: SourceObject, ports: Ports, suites: AuditSuites, config: PipelineConfig, stop: _Stop) -> Result:
    if stop():
        return stop.error(source)
    try:
        return run_wap(source, ports=ports, suites=suites, config=config)
    except WapError as exc:
        return exc


def _run_group(
    target: TableRef, items: list[_Item], ports: Ports, writer: BatchTableWriter, suites: AuditSuites,
    config: PipelineConfig, stop: _Stop,
) -> dict[int, Result]:
    settled: dict[int, Result] = {}
    pending: list[_Item] = []
    for item in items:  # a missing or empty object is the one-by-one path's to explain
        try:
            current = ports.objects.head(item.source.bucket, item.source.key)
        except BadInputError:
            settled[item.index] = _alone(item.source, ports, suites, config, stop)
            continue
        except WapError as exc:
            settled[item.index] = exc
            continue
        source = with_version(item.source, current)
        first = next((p for p in pending if p.source.identity == source.identity), None)
        if first is not None:  # the same version announced twice in one delivery: written once
            settled[item.index] = IngestOutcome(
                source=source, status=OutcomeStatus.DUPLICATE, table=target.qualified,
                message=f"{source.uri} was delivered twice in this batch; it is handled once (the other delivery)")
        elif current.size == 0:
            settled[item.index] = _alone(item.source, ports, suites, config, stop)
        else:
            pending.append(replace(item, source=source))
    if not pending:
        return settled
    for attempt in range(1, config.merge_attempts + 1):
        try:
            later = _attempt_group(target, pending, ports, writer, suites, config, settled, attempt)
        except (MergeConflictError, BranchExistsError, BranchNotFoundError, StaleHashError) as exc:
            if attempt == config.merge_attempts:
                return settled | {i.index: exc for i in pending if i.index not in settled}
            ceiling = min(config.backoff_cap_seconds, config.backoff_seconds * 2 ** (attempt - 1))
            delay = ceiling / 2 + random.uniform(0, ceiling / 2)
            log.info("batch for %s: conflict (attempt %d), retrying from main in %.2fs: %s", target, attempt, delay,
                     exc)
            config.sleep(delay)
            pending = [i for i in pending if i.index not in settled]
            continue
        except WapError as exc:
            log.warning("batch for %s failed: %s", target, exc)
            return settled | {i.index: exc for i in pending if i.index not in settled}
        for item in later:  # unreadable together, or rejected by the audit: each alone, on a branch of its own
            settled[item.index] = _alone(item.source, ports, suites, config, stop)
        return settled
    raise AssertionError("unreachable")  # pragma: no cover


def _attempt_group(
    target: TableRef, pending: list[_Item], ports: Ports, writer: BatchTableWriter, suites: AuditSuites,
    config: PipelineConfig, settled: dict[int, Result], attempt: int,
) -> list[_Item]:
    """One try at the group; fills `settled` and returns the items to run alone afterwards."""
    watch = Stopwatch()
    with watch.stage("branch"):
        main_hash = ports.catalog.ensure_namespace(config.main_branch, target.namespace)
        published = writer.find_appends(target, config.main_branch, [i.source.identity for i in pending])
    for item in pending:
        found = published.get(item.source.identity)
        if found is not None:
            settled[item.index] = duplicate_outcome(item.source, target, found, ports)
    todo = [i for i in pending if i.index not in settled]
    if not todo:
        return []
    suite = suites.suite_for(target)
    reports: dict[str, AuditReport] = {}
    measured_rows: dict[str, int] = {}
    context = history_context(suite, target, ports.catalog, config.main_branch)  # once for the batch

    def accept(source: SourceObject, measured: Measurements) -> bool:
        report = audit(suite, target, measured, context)
        reports[source.identity] = report
        measured_rows[source.identity] = measured.row_count
        return report.passed and measured.row_count > 0

    def snapshot_properties(accepted: Sequence[SourceObject]) -> Mapping[str, str]:
        return batch_snapshot_properties([(s, measured_rows[s.identity]) for s in accepted])

    branch = ports.catalog.create_branch(batch_branch_name(target, [i.source for i in todo], attempt), main_hash)
    try:
        with watch.stage("append"):
            result = writer.append_batch([(i.source, i.fmt) for i in todo], target, branch.name, suite.plan(), accept,
                                         snapshot_properties)
    except WapError:
        discard_quietly(ports.catalog, branch.name)
        raise
    accepted = {s.identity for s in result.accepted}
    if result.appended is None:
        discard_quietly(ports.catalog, branch.name)
    else:
        expected = sum(measured_rows[i] for i in accepted)
        if result.appended.rows != expected:  # what was written is exactly what was audited, or nothing publishes
            discard_quietly(ports.catalog, branch.name)
            raise EngineError(f"batch for {target} on {branch.name!r}: the snapshot holds {result.appended.rows} "
                              f"rows but the audited files hold {expected}; nothing was published.")
        files = [(i.source, measured_rows[i.source.identity]) for i in todo if i.source.identity in accepted]
        with watch.stage("merge"):
            head = Branch(branch.name, ports.catalog.reference_hash(branch.name))
            try:
                merged = ports.catalog.merge(
                    head, config.main_branch, main_hash,
                    message=f"wap: publish {len(files)} files into {target} ({expected} rows)",
                    properties=batch_merge_properties(target, files),
                )
            except MergeConflictError:
                discard_quietly(ports.catalog, branch.name)
                raise
            discard_quietly(ports.catalog, branch.name)
        for item in todo:
            if item.source.identity in accepted:
                rows = measured_rows[item.source.identity]
                log.info("published %s into %s (%d rows, batch of %d)", item.source.uri, target, rows, len(files))
                settled[item.index] = IngestOutcome(
                    source=item.source, status=OutcomeStatus.PUBLISHED, table=target.qualified, branch=branch.name,
                    rows=rows, report=reports.get(item.source.identity), merged_hash=merged, attempts=attempt,
                    message=f"published {rows} rows into {target} (one merge for {len(files)} files)",
                    timings=watch.laps(),
                )
    for identity, reason in result.unreadable.items():
        log.info("batch for %s: %s runs alone (%s)", target, identity, reason)
    return [i for i in todo if i.source.identity not in accepted]
