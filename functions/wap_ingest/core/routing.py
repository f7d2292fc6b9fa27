"""Routing, decided once for every entry point and event shape: which bucket may be read, which table a key
names, in which format, and what the object really is (its size and version come from the store, not the event).

`route` refuses an object (a BadInputError: INVALID, alerted once, never retried) before anything is read when
its bucket is not a configured source bucket; then validates the table, whoever named it (the key's prefix, a
manifest entry or `wap ingest --table`): never a table the service owns (`check_target`), and with `strict_tables`
only one the audits file lists; then the format, and reads the object's head.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .audits import AuditSuites
from .errors import EmptySourceError, RefusedEventError
from .formats import format_for_key
from .models import FileFormat, SourceObject, TableRef
from .naming import LOADS_PREFIX, PENDING_PREFIX, check_target, table_for_key
from .ports import ObjectStore


@dataclass(frozen=True)
class Routed:
    """An object version ready for the pipeline: its current head (size, ETag, version) and its table."""

    source: SourceObject
    table: TableRef
    fmt: FileFormat
    seconds: float = 0.0  # how long routing took (the `route` stage of the outcome's timings)


def route(
    source: SourceObject,
    *,
    objects: ObjectStore,
    suites: AuditSuites,
    default_namespace: str,
    source_buckets: Collection[str] = (),
    refused_buckets: Collection[str] = (),
    table: TableRef | None = None,
) -> Routed:
    """Raises a BadInputError naming the object and the fix; infrastructure errors of the store propagate."""
    check_bucket(source.bucket, source.uri, source_buckets=source_buckets, refused_buckets=refused_buckets)
    if table is None and source.key.startswith((PENDING_PREFIX, LOADS_PREFIX)):  # ingest() runs them as a load
        raise RefusedEventError(f"{source.uri} belongs to a multi-table load: it is ingested with its manifest "
                                f"({LOADS_PREFIX}<name>.json), not alone. Fix: wap ingest s3://{source.bucket}/"
                                f"{LOADS_PREFIX}<name>.json (or name a table with --table).")
    target = table or table_for_key(source.key, default_namespace=default_namespace, bucket=source.bucket)
    check_target(target, source.uri)
    suites.check_listed(target, source.uri)
    fmt = format_for_key(source.key, bucket=source.bucket, table=target)
    current = objects.head(source.bucket, source.key)
    if current.size == 0:
        raise EmptySourceError(f"{source.uri}: the object is empty (0 bytes); nothing to ingest into {target}. "
                               f"Fix: upload the complete file again.")
    return Routed(with_version(source, current), target, fmt)


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


def with_version(requested: SourceObject, current: SourceObject) -> SourceObject:
    """The object as the store has it now: its size always (an event's size is a claim, the store's a fact), the
    event's version markers when it carried them (they name the version the event announced)."""
    return SourceObject(
        bucket=requested.bucket,
        key=requested.key,
        size=current.size if current.size is not None else requested.size,
        etag=requested.etag or current.etag,
        version_id=requested.version_id or current.version_id,
    )
