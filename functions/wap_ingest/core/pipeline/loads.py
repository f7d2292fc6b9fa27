"""Multi-table atomic loads (issue 16, item 2): several files, several tables, one merge or none.

Objects under the top-level prefix `_pending/` are not ingested by their own notifications (WAITING). A manifest
`_loads/<name>.json` in a source bucket, `{"files": ["_pending/<table>/<file>", {"key": ..., "table": ...}, ...]}`
(keys in the manifest's own bucket; a file's table is the prefix after `_pending/` unless the entry names one), starts
one WAP run for the whole set: one branch, each file appended to its table and audited with its table's suite, then
one merge for every table, or, if any file fails, none: the branch keeps everything, its report is stored, and one
alert lists each file's result. Exactly once by each file's identity (every file on `main` already: DUPLICATE) and by
the manifest's (on the merge commit). A merge conflict redoes the whole load from `main`, never a forced merge.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace

from wap_ingest.core import ledger, lineage
from wap_ingest.core.audits import AuditSuites, audit
from wap_ingest.core.errors import (
    BadInputError,
    EmptySourceError,
    MergeConflictError,
    StaleHashError,
    UnreadableSourceError,
    WapError,
)
from wap_ingest.core.history import history_context
from wap_ingest.core.models import AuditReport, Branch, IngestOutcome, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.naming import (
    BRANCH_PREFIX,
    LOADS_PREFIX,
    PENDING_PREFIX,
    identity_digest,
    table_for_key,
    table_ref_from,
)
from wap_ingest.core.outcomes import invalid
from wap_ingest.core.routing import Routed, check_bucket, route

from .base import PipelineConfig, Ports, retry_delay

log = logging.getLogger(__name__)

MAX_MANIFEST_BYTES = 1024 * 1024
MAX_FILES = 1000


def is_pending(key: str) -> bool:
    return key.startswith(PENDING_PREFIX)


def is_manifest(key: str) -> bool:
    return key.startswith(LOADS_PREFIX) and key.lower().endswith(".json")


def waiting(source: SourceObject) -> IngestOutcome:
    return IngestOutcome(source=source, status=OutcomeStatus.WAITING,
                         message=f"{source.uri} waits under {PENDING_PREFIX}: it is ingested with the manifest "
                         f"({LOADS_PREFIX}<name>.json) that lists it")


def parse_manifest(body: bytes, manifest: SourceObject, default_namespace: str) -> list[tuple[str, TableRef]]:
    """(key, table) for each file; a BadInputError naming the manifest, the entry and the fix."""
    fix = (f'Fix: upload {manifest.uri} again as {{"files": ["_pending/<table>/<file>", '
           f'{{"key": "_pending/...", "table": "<table>"}}]}}.')
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnreadableSourceError(f"{manifest.uri}: the manifest is not JSON ({exc}). {fix}") from exc
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list) or not files:
        raise UnreadableSourceError(f"{manifest.uri}: the manifest lists no files (a non-empty `files` list). {fix}")
    if len(files) > MAX_FILES:
        raise UnreadableSourceError(f"{manifest.uri}: {len(files)} files; a load takes at most {MAX_FILES}. Fix: split "
                                    f"it into several manifests.")
    entries: list[tuple[str, TableRef]] = []
    for index, entry in enumerate(files):
        key = entry.get("key") if isinstance(entry, dict) else entry
        if not isinstance(key, str) or not is_pending(key) or key.endswith("/"):
            raise UnreadableSourceError(
                f"{manifest.uri}: entry {index} ({entry!r}) is not a key under {PENDING_PREFIX} in this bucket (a "
                f"load's files wait there, so that their own notifications do not ingest them). {fix}")
        where = f"s3://{manifest.bucket}/{key}"
        named = entry.get("table") if isinstance(entry, dict) else None
        if named is not None:
            table = table_ref_from(str(named), default_namespace=default_namespace, source=manifest.uri)
        else:
            table = table_for_key(key.removeprefix(PENDING_PREFIX), default_namespace=default_namespace,
                                  bucket=manifest.bucket)
        if key in {k for k, _ in entries}:
            raise UnreadableSourceError(f"{manifest.uri}: {where} is listed twice. {fix}")
        entries.append((key, table))
    return entries


@dataclass(frozen=True)
class _Part:
    routed: Routed
    rows: int
    report: AuditReport


class Load:
    """One manifest's run. `run` returns its outcome (the files' own outcomes in `parts`) or the error to retry."""

    def __init__(self, ports: Ports, suites: AuditSuites, config: PipelineConfig) -> None:
        self.ports, self.suites, self.config = ports, suites, config

    def prepare(self, manifest: SourceObject) -> tuple[SourceObject, list[Routed]] | IngestOutcome | WapError:
        """The manifest's exact version and its files routed (their sizes from the store), or why it cannot run."""
        try:
            return self._read(manifest)
        except BadInputError as exc:
            return invalid(manifest, exc)
        except WapError as exc:
            return exc

    def run(self, manifest: SourceObject) -> IngestOutcome | WapError:
        prepared = self.prepare(manifest)
        return prepared if not isinstance(prepared, tuple) else self.run_prepared(*prepared)

    def run_prepared(self, head: SourceObject, routed: list[Routed]) -> IngestOutcome | WapError:
        for attempt in range(1, self.config.merge_attempts + 1):
            try:
                return self._attempt(head, routed, attempt)
            except (MergeConflictError, StaleHashError) as exc:
                if attempt == self.config.merge_attempts:
                    return exc
                self.config.sleep(retry_delay(attempt, self.config))
            except BadInputError as exc:
                return invalid(head, exc)
            except WapError as exc:
                return exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, manifest: SourceObject) -> tuple[SourceObject, list[Routed]]:
        config, objects = self.config, self.ports.objects
        check_bucket(manifest.bucket, manifest.uri, source_buckets=config.source_buckets,
                     refused_buckets=config.refused_buckets)
        head = objects.head(manifest.bucket, manifest.key)
        head = SourceObject(manifest.bucket, manifest.key, head.size, manifest.etag or head.etag,
                            manifest.version_id or head.version_id)
        entries = parse_manifest(objects.read_bytes(head, MAX_MANIFEST_BYTES), head,
                                 config.default_namespace)
        routed = [route(SourceObject(head.bucket, key), objects=objects, suites=self.suites,
                        default_namespace=config.default_namespace,
                        source_buckets=config.source_buckets, refused_buckets=config.refused_buckets,
                        table=table) for key, table in entries]
        return head, routed

    def _attempt(self, manifest: SourceObject, routed: list[Routed], attempt: int) -> IngestOutcome:
        catalog, main = self.ports.catalog, self.config.main_branch
        tables = sorted({r.table for r in routed}, key=lambda t: t.qualified)
        main_hash = ""
        for namespace in sorted({t.namespace for t in tables}):
            main_hash = catalog.ensure_namespace(main, namespace)
        on_main: dict[str, int] = {}
        for table in tables:
            found = catalog.find_published(main, table, [r.source.identity for r in routed if r.table == table])
            on_main |= {identity: entry.rows for identity, entry in found.items()}
        if on_main:
            return self._published_before(manifest, routed, on_main)
        name = f"{BRANCH_PREFIX}-{tables[0].namespace}-{tables[0].name}-{identity_digest(manifest.identity)}-" \
               f"l{attempt}x{secrets.token_hex(3)}"
        branch = catalog.create_branch(name, main_hash)
        try:
            parts = [self._write(r, branch.name) for r in routed]
        except BadInputError as exc:
            catalog.delete_branch(Branch(branch.name, catalog.reference_hash(branch.name)))
            raise BadInputError(f"{exc} (in the load {manifest.uri}; nothing of it was published)") from exc
        except Exception:  # an outage, or a bug: no branch of this attempt stays behind
            catalog.delete_branch(Branch(branch.name, catalog.reference_hash(branch.name)))
            raise
        if not all(p.report.passed for p in parts):
            return self._rejected(manifest, branch.name, parts)
        head = catalog.record_published(branch.name, [e for p in parts for e in ledger.entries_for(
            p.routed.table, [(p.routed.source, p.rows)], branch.name, self.config.clock())])
        files = [(p.routed.source, p.routed.table, p.rows) for p in parts]
        total = sum(p.rows for p in parts)
        try:
            merged = catalog.merge(head, main, main_hash, f"wap: load {manifest.uri} into "
                                   f"{', '.join(t.qualified for t in tables)} ({total} rows)",
                                   lineage.load_properties(manifest, files))
        except MergeConflictError:
            catalog.delete_branch(head)
            raise
        catalog.delete_branch(Branch(branch.name, catalog.reference_hash(branch.name)))
        log.info("published the load %s: %d files, %d rows into %s", manifest.uri, len(parts), total,
                 ", ".join(t.qualified for t in tables))
        outcomes = tuple(IngestOutcome(source=p.routed.source, status=OutcomeStatus.PUBLISHED,
                                       table=p.routed.table.qualified, branch=branch.name, rows=p.rows,
                                       report=p.report, merged_hash=merged) for p in parts)
        return IngestOutcome(source=manifest, status=OutcomeStatus.PUBLISHED, table=_names(tables),
                             branch=branch.name, rows=total, merged_hash=merged, attempts=attempt, parts=outcomes,
                             message=f"published the load of {len(parts)} files into {_names(tables)} in one merge "
                             f"({total} rows)")

    def _write(self, item: Routed, branch: str) -> _Part:
        suite = self.suites.suite_for(item.table)
        appended = self.ports.writer.append([(item.source, item.fmt)], item.table, branch, suite.plan(),
                                            allow_new_columns=suite.allow_new_columns,
                                            read_options=suite.format_options, layout=suite.layout,
                                            keep_snapshots=suite.maintenance.keep_snapshots)
        measured = appended.measured[item.source.identity]
        if appended.snapshot is None or measured.row_count == 0:
            raise EmptySourceError(f"{item.source.uri}: the file has no rows; nothing to ingest into {item.table}. "
                                   f"Fix: upload it with data, then the manifest again.")
        context = history_context(suite, item.table, self.ports.catalog, self.config.main_branch)
        return _Part(item, measured.row_count, audit(suite, item.table, measured, context))

    def _published_before(self, manifest: SourceObject, routed: list[Routed], on_main: dict[str, int]) -> IngestOutcome:
        if len(on_main) == len(routed):
            return IngestOutcome(source=manifest, status=OutcomeStatus.DUPLICATE, table=_names(r.table for r in routed),
                                 rows=sum(on_main.values()), message=f"every file of the load {manifest.uri} is on "
                                 f"main already; nothing to do")
        listed = ", ".join(r.source.uri for r in routed if r.source.identity in on_main)
        raise BadInputError(
            f"{manifest.uri}: {len(on_main)} of its {len(routed)} files are on main already ({listed}), published "
            f"apart from this load; a load publishes all its files together or none. Fix: remove them from the "
            f"manifest and upload it again.")

    def _rejected(self, manifest: SourceObject, branch: str, parts: list[_Part]) -> IngestOutcome:
        outcomes = tuple(IngestOutcome(
            source=p.routed.source, status=OutcomeStatus.PUBLISHED if p.report.passed else OutcomeStatus.REJECTED,
            table=p.routed.table.qualified, branch=branch, rows=p.rows, report=p.report) for p in parts)
        failed = "; ".join(f"{p.routed.source.uri} into {p.routed.table}: " + ", ".join(
            f"{c.check}({c.target}) {c.measured}" for c in p.report.failures) for p in parts if not p.report.passed)
        outcome = IngestOutcome(
            source=manifest, status=OutcomeStatus.REJECTED, table=_names(p.routed.table for p in parts), branch=branch,
            rows=sum(p.rows for p in parts), parts=outcomes,
            message=f"the load was not published (no table changed): {failed}. Every file waits on branch {branch!r}.")
        if self.ports.reports is not None:
            try:
                outcome = replace(outcome, message=f"{outcome.message} Report: "
                                  f"{self.ports.reports.save(branch, outcome.to_dict())}.")
            except WapError as exc:
                log.warning("could not keep the report of the load %s: %s", manifest.uri, exc)
        log.warning("load %s rejected: %s", manifest.uri, failed)
        return outcome


def _names(tables: Iterable[TableRef]) -> str:
    return ", ".join(sorted({t.qualified for t in tables}))
