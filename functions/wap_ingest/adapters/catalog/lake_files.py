"""CatalogLakeFiles: the LakeFiles port (core.lake_files) on Nessie, Iceberg metadata read with PyIceberg, and S3.

A reading of the catalog (nessie_live: every reference, every commit of each) and of the metadata its commits name
(iceberg_files) covers every table at once: a file is needed when any table of any live commit needs it, so a file
under one table's location that another table uses is never removed, and a reading serves every table of one
`wap maintain --all` (the core asks for one begun after its sweep began; `since`).

A problem found while reading (a metadata file, manifest list or manifest missing or unreadable) stops the sweep of
every location it may concern: the table's own, and any location of the problem's table (known from its other
metadata files, or the folder of the metadata file that is missing) inside or around it. Listing and deleting are
S3's `ListObjectsV2` and `DeleteObjects` (1,000 keys a call), through the one AWS table (aws_errors); a path outside
the location it is removed from is refused before anything is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.aws import S3, aws_error
from wap_ingest.adapters.catalog.iceberg_files import MetadataFiles, NamedFiles, table_root
from wap_ingest.adapters.catalog.live import LiveCatalog, NessieLiveContents
from wap_ingest.core.errors import CatalogError, ObjectStoreUnavailableError, UnexpectedError, WapError
from wap_ingest.core.lake_files import LakeFiles, StoredFile, TableFiles, under
from wap_ingest.core.models import TableRef

DELETE_BATCH = 1000  # S3's DeleteObjects limit


@dataclass(frozen=True)
class _Reading:
    began: datetime
    catalog: LiveCatalog
    named: dict[str, NamedFiles]  # by content id
    needed: frozenset[str]
    kept: frozenset[str]


class CatalogLakeFiles(LakeFiles):
    def __init__(self, contents: NessieLiveContents, metadata: MetadataFiles, s3_client: Any, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._contents, self._metadata, self._s3, self._clock = contents, metadata, s3_client, clock
        self._reading: _Reading | None = None

    def referenced(self, table: TableRef, since: datetime) -> TableFiles | None:
        try:
            reading = self._read(since)
        except WapError:
            raise
        except Exception as exc:  # PyIceberg's or this code's: never a crash of `wap maintain`, never a removal
            raise UnexpectedError(f"reading what the catalog's references need of {table}: unexpected "
                                  f"{type(exc).__name__}: {exc}. Nothing is removed; see the log.") from exc
        mine = reading.catalog.of(table.qualified)
        if not mine:
            return None
        locations = tuple(sorted({loc for c in mine for loc in reading.named[c.content_id].locations}))
        if not locations:
            problems = [p.text for c in mine for p in reading.named[c.content_id].problems]
            raise CatalogError(f"{table}: none of its metadata files could be read, so its location is unknown "
                               f"({'; '.join(problems[:3])}). Fix: restore the file, or discard the branch whose "
                               f"commits name it (wap branches).")
        for content_id, named in reading.named.items():
            concerned = [loc for loc in locations if any(_overlap(loc, root) for root in _roots(named))]
            if named.problems and concerned:
                owner = ", ".join(sorted(reading.catalog.contents[content_id].keys))
                raise CatalogError(
                    f"{table}: the files of {owner} (which may lie under {concerned[0]}) cannot all be read: "
                    f"{'; '.join(p.text for p in named.problems[:3])}"
                    + (f" (and {len(named.problems) - 3} more)" if len(named.problems) > 3 else "")
                    + ". Nothing is removed there while what the catalog's commits need is unknown. Fix: restore "
                    "the file, or discard the branch whose commits name it (wap branches), then run wap maintain "
                    "again.")
        return TableFiles(
            table.qualified, locations,
            frozenset(p for p in reading.needed if any(under(p, loc) for loc in locations)),
            frozenset(p for p in reading.kept if any(under(p, loc) for loc in locations)),
            references=reading.catalog.references, commits=reading.catalog.commits,
            metadata_files=sum(n.metadata_files for n in reading.named.values()))

    def _read(self, since: datetime) -> _Reading:
        if self._reading is not None and self._reading.began >= since:
            return self._reading
        began = self._clock()
        catalog = self._contents.read()
        named = self._metadata.named({cid: content.metadata for cid, content in catalog.contents.items()})
        self._reading = _Reading(began, catalog, named,
                                 frozenset(p for n in named.values() for p in n.needed),
                                 frozenset(p for n in named.values() for p in n.kept))
        return self._reading

    def stored(self, location: str) -> list[StoredFile]:
        bucket, prefix = _split(location)
        found: list[StoredFile] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
                for item in page.get("Contents", []):
                    modified = item["LastModified"]
                    found.append(StoredFile(f"s3://{bucket}/{item['Key']}", int(item.get("Size", 0)),
                                            modified if modified.tzinfo else modified.replace(tzinfo=UTC)))
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=S3, doing="listing the table's files under", resource=f"{location}/",
                            setting="LAKE_BUCKET") from exc
        return found

    def remove(self, location: str, paths: Sequence[str]) -> None:
        bucket, _ = _split(location)
        outside = [p for p in paths if not under(p, location) or p.endswith("/")]
        if outside:
            raise CatalogError(f"refusing to remove {outside[0]}: it is not a file inside {location}/ (nothing was "
                               f"removed)")
        keys = [p.removeprefix(f"s3://{bucket}/") for p in paths]
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start:start + DELETE_BATCH]
            try:
                answer = self._s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch],
                                                                        "Quiet": True})
            except (ClientError, BotoCoreError) as exc:
                raise aws_error(exc, service=S3, doing=f"removing {len(batch)} unreferenced file(s) under",
                                resource=f"{location}/", setting="LAKE_BUCKET") from exc
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise ObjectStoreUnavailableError(
                    f"S3 did not remove {len(errors)} of {len(batch)} file(s) under {location}/ (first: "
                    f"s3://{bucket}/{first.get('Key')}: {first.get('Code')} {first.get('Message')}). Fix: if it says "
                    f"AccessDenied, allow s3:DeleteObject on the warehouse prefix; else run wap maintain again.")


def _split(location: str) -> tuple[str, str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    return bucket, prefix.rstrip("/")


def _roots(named: NamedFiles) -> set[str]:
    """Where a table's files may lie: its locations, and the table folder of each file it could not read."""
    return named.locations | {table_root(problem.path) for problem in named.problems}


def _overlap(a: str, b: str) -> bool:
    return a == b or under(a, b) or under(b, a)
