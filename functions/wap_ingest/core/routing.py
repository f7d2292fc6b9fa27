"""Routing, decided in one place for every entry point and event shape: which bucket may be read, which table a key
names, in which format, what the object really is (the version the event announced, exactly: its size and ETag come
from the store for that version, never from the current one or the event), and where it runs.

`Router.place` says, for any object (a file, a load's manifest, a load's file on its own): the function, EMR or
refuse (`Where`). Files of every path (the function's events, `wap ingest`, `wap audit`, the EMR job), and each
entry of a load's manifest, are routed by `route`: it refuses an object (a BadInputError: INVALID, alerted once,
never retried) before anything is read when its bucket is not a configured source bucket; then validates the table,
whoever named it (the key's prefix, a manifest entry or `wap ingest --table`): never a table the service owns
(`check_target`), and with `strict_tables` only one the audits file lists; then the format, and reads the object's
head and weighs it. A file, or a load as a whole (its files' weight together), runs on EMR above the large-file
threshold (`where_for`, the one place it is compared), else here.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Collection
from dataclasses import dataclass, replace

from .audits import AuditSuites
from .errors import BadInputError, EmptySourceError, RefusedEventError, SourceNotFoundError, WapError
from .formats import format_for_key
from .manifests import MAX_MANIFEST_BYTES, is_manifest, is_pending, parse_manifest, waiting
from .models import FileFormat, IngestOutcome, SourceObject, TableRef
from .naming import LOADS_PREFIX, PENDING_PREFIX, check_target, table_for_key
from .outcomes import invalid, unexpected
from .ports import ObjectStore
from .weights import Weight, check_inflation


@dataclass(frozen=True)
class Routed:
    """An object version ready for the pipeline: the announced version as the store has it (size, ETag, version),
    its table, its format, and what it weighs once decompressed (core.weights)."""

    source: SourceObject
    table: TableRef
    fmt: FileFormat
    seconds: float = 0.0  # how long routing took (the `route` stage of the outcome's timings)
    weight: Weight | None = None  # None: not weighed (its stored size stands)

    @property
    def processed(self) -> int:
        """The bytes the engine will process: what routing, the staging budget and the disk check go by."""
        return self.weight.processed if self.weight is not None else self.source.size or 0

    @property
    def local_bytes(self) -> int:
        return self.weight.local_bytes if self.weight is not None else 2 * (self.source.size or 0)


def route(
    source: SourceObject,
    *,
    objects: ObjectStore,
    suites: AuditSuites,
    default_namespace: str,
    source_buckets: Collection[str] = (),
    refused_buckets: Collection[str] = (),
    table: TableRef | None = None,
    max_inflation: float | None = None,
) -> Routed:
    """Raises a BadInputError naming the object and the fix (a decompression bomb beyond `max_inflation` too);
    infrastructure errors of the store propagate."""
    check_bucket(source.bucket, source.uri, source_buckets=source_buckets, refused_buckets=refused_buckets)
    if table is None and source.key.startswith((PENDING_PREFIX, LOADS_PREFIX)):  # ingest() runs them as a load
        raise RefusedEventError(f"{source.uri} belongs to a multi-table load: it is ingested with its manifest "
                                f"({LOADS_PREFIX}<name>.json), not alone. Fix: wap ingest s3://{source.bucket}/"
                                f"{LOADS_PREFIX}<name>.json (or name a table with --table).")
    target = table or table_for_key(source.key, default_namespace=default_namespace, bucket=source.bucket)
    check_target(target, source.uri)
    suites.check_listed(target, source.uri)
    try:
        fmt = format_for_key(source.key, bucket=source.bucket, table=target)
        current = exact_version(source, objects)
        if current.size == 0:
            raise EmptySourceError(f"{source.uri}: the object is empty (0 bytes); nothing to ingest into {target}. "
                                   f"Fix: upload the complete file again.")
        weight = objects.weigh(current, fmt)
        if max_inflation is not None:
            check_inflation(current, weight, max_inflation)
    except BadInputError as exc:  # the file is the problem, for this table: its outcome and alert say which
        exc.routed_to(target)
        raise
    return Routed(current, target, fmt, weight=weight)


def check_bucket(
    bucket: str, what: str, *, source_buckets: Collection[str] = (), refused_buckets: Collection[str] = ()
) -> None:
    """Raises RefusedEventError when `bucket` may not be read: a refused one (the lake's), or, when source buckets
    are configured, any other."""
    if bucket in refused_buckets or (source_buckets and bucket not in source_buckets):
        allowed = ", ".join(sorted(source_buckets)) or "any but " + ", ".join(sorted(refused_buckets))
        raise RefusedEventError(
            f"{what}: bucket {bucket!r} is not a source bucket of this service ({allowed}); nothing was read. Fix: "
            f"upload the file to a source bucket, or add {bucket!r} to WAP_SOURCE_BUCKETS if it really is one "
            f"(never the lake bucket)."
        )


def exact_version(source: SourceObject, objects: ObjectStore) -> SourceObject:
    """The version the event announced, as the store has it (its own size and ETag): by its version id; without
    one (an unversioned bucket, or an event that carries none), the current version, which must be the announced
    one when the event named an ETag. A version that no longer exists is the file's fault (INVALID), never a read of
    another version."""
    current = objects.head(source.bucket, source.key, source.version_id)
    announced = (source.etag or "").strip('"')
    if source.version_id is None and announced and (current.etag or "").strip('"') != announced:
        raise SourceNotFoundError(
            f"{source.uri}: the version announced (ETag {announced}) no longer exists: the key was overwritten since "
            f"(ETag {current.etag}); nothing was read. The newer version has its own event. Fix: to load the "
            f"announced content, upload it again (a versioned bucket keeps every version readable).")
    return current


def objects_at(
    bucket: str, key: str, what: str, *, objects: ObjectStore, source_buckets: Collection[str] = (),
    refused_buckets: Collection[str] = ()
) -> list[SourceObject]:
    """`wap ingest`'s objects: the object `key` names, else every object under it as a prefix; nothing is read from a
    bucket that is not a source bucket (RefusedEventError), and a name that is neither is SourceNotFoundError."""
    check_bucket(bucket, what, source_buckets=source_buckets, refused_buckets=refused_buckets)
    if key and not key.endswith("/"):
        try:
            return [objects.head(bucket, key)]
        except SourceNotFoundError:
            pass  # not an object: a prefix
    found = objects.list_objects(bucket, key)
    if not found:
        raise SourceNotFoundError(f"{what}: no object or prefix with that name. Fix: check the bucket and key.")
    return found


class Where(enum.StrEnum):
    FUNCTION = "function"  # here: the function's engine (in the EMR job, the cluster's: it sends nothing further)
    EMR = "emr"  # above the large-file threshold: EMR Serverless runs the same pipeline
    REFUSED = "refused"  # not run: its result is settled (INVALID; WAITING for its manifest) or the error to retry


def where_for(processed: int, large_file_bytes: int | None) -> Where:
    """The large-file threshold (WAP_LARGE_FILE_BYTES), compared here only: above it, EMR; at or below, or without
    EMR (None: not configured, or the EMR job itself), here."""
    return Where.EMR if large_file_bytes is not None and processed > large_file_bytes else Where.FUNCTION


@dataclass(frozen=True)
class Placed:
    """Where an object runs. `routed`: the file, or a load as one object (its manifest's version, its first table,
    its files' weight together); `files`: a load's files, each routed; `result`: a refused object's outcome or
    error."""

    where: Where
    routed: Routed | None = None
    files: tuple[Routed, ...] = ()
    result: IngestOutcome | WapError | None = None


@dataclass(frozen=True)
class Router:
    """Routing's rules for one run: the store the objects are read from, the audits file's tables, the buckets, the
    inflation limit and the large-file threshold (None: everything runs here)."""

    objects: ObjectStore
    suites: AuditSuites
    default_namespace: str
    source_buckets: frozenset[str] = frozenset()
    refused_buckets: frozenset[str] = frozenset()
    max_inflation: float | None = None
    large_file_bytes: int | None = None

    def route(self, source: SourceObject, table: TableRef | None = None) -> Routed:
        """One file routed (module-level `route`): raises a BadInputError naming it and the fix."""
        return route(source, objects=self.objects, suites=self.suites, default_namespace=self.default_namespace,
                     source_buckets=self.source_buckets, refused_buckets=self.refused_buckets, table=table,
                     max_inflation=self.max_inflation)

    def place(self, source: SourceObject, table: TableRef | None = None, *, loads: bool = True) -> Placed:
        """The function, EMR or refuse, for any object: a load's file waits for its manifest (WAITING), a manifest is
        read and each of its files routed (the load runs where their weight together says), any other file is routed
        and weighed; a file the service cannot take is INVALID, a store that fails is the error to retry.
        `loads=False` (a dry run): a load's manifest or file is refused as any file not to be ingested alone."""
        started = time.perf_counter()
        try:
            if loads and table is None and is_pending(source.key):
                return Placed(Where.REFUSED, result=waiting(source))
            if loads and table is None and is_manifest(source.key):
                return self.place_load(source)
            routed = replace(self.route(source, table), seconds=time.perf_counter() - started)
            return Placed(where_for(routed.processed, self.large_file_bytes), routed)
        except BadInputError as exc:
            outcome = invalid(source, exc, table or exc.table)
            return Placed(Where.REFUSED, result=replace(outcome, timings={"route": time.perf_counter() - started}))
        except WapError as exc:
            return Placed(Where.REFUSED, result=exc)
        except Exception as exc:
            return Placed(Where.REFUSED, result=unexpected(f"routing {source.uri}", exc))

    def place_load(self, manifest: SourceObject) -> Placed:
        """A load: the manifest's exact version and each of its files routed, the load placed by their weight
        together, or refused (INVALID) as a whole. A store that fails raises (`place` makes it the error)."""
        try:
            check_bucket(manifest.bucket, manifest.uri, source_buckets=self.source_buckets,
                         refused_buckets=self.refused_buckets)
            head = exact_version(manifest, self.objects)
            entries = parse_manifest(self.objects.read_bytes(head, MAX_MANIFEST_BYTES), head, self.default_namespace)
            files = tuple(self.route(SourceObject(head.bucket, key), table) for key, table in entries)
        except BadInputError as exc:
            return Placed(Where.REFUSED, result=invalid(manifest, exc))
        processed = sum(f.processed for f in files)
        weight = Weight(sum(f.source.size or 0 for f in files), processed, "its files")
        first = min((f.table for f in files), key=lambda t: t.qualified)  # where a run on EMR is recorded
        return Placed(where_for(processed, self.large_file_bytes), Routed(head, first, files[0].fmt, weight=weight),
                      files)
