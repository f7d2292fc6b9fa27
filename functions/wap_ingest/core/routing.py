"""Routing, decided once for every entry point and event shape: which bucket may be read, which table a key
names, in which format, and what the object really is: the version the event announced, exactly (its size and ETag
come from the store for that version, never from the current one or the event).

`route` refuses an object (a BadInputError: INVALID, alerted once, never retried) before anything is read when
its bucket is not a configured source bucket; then validates the table, whoever named it (the key's prefix, a
manifest entry or `wap ingest --table`): never a table the service owns (`check_target`), and with `strict_tables`
only one the audits file lists; then the format, and reads the object's head.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .audits import AuditSuites
from .errors import BadInputError, EmptySourceError, RefusedEventError, SourceNotFoundError
from .formats import format_for_key
from .models import FileFormat, SourceObject, TableRef
from .naming import LOADS_PREFIX, PENDING_PREFIX, check_target, table_for_key
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
