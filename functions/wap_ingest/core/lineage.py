"""Lineage: the properties that say which source objects a snapshot or a merge commit carries. Defined once.

Two places carry them:
- the Iceberg snapshot of an append (its summary): one file appended alone carries `wap.source.*` (its rows are
  the snapshot's `added-records`); a batch carries each file's identity and rows, numbered
  (`wap.source.identity.<n>`, `wap.source.rows.<n>`). The exactly-once lookup reads them back.
- the Nessie merge commit that published it: `wap.table`, `wap.rows` and either the file's `wap.source.*` or, for a
  batch, `wap.files` and `wap.sources` (a JSON list of {bucket, key, identity, rows}). History and review read them.
Both also say how the engine took the file in (`wap.write`: registered or rewritten, and `wap.write.reason`).
Every module that writes or reads these names imports them from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .models import Quarantined, SourceObject, TableRef
from .write_paths import WritePath

SOURCE_PREFIX = "wap.source."
BUCKET = f"{SOURCE_PREFIX}bucket"
KEY = f"{SOURCE_PREFIX}key"
IDENTITY = f"{SOURCE_PREFIX}identity"  # alone; `.<n>` on a batch snapshot
ROWS = f"{SOURCE_PREFIX}rows"  # `.<n>` on a batch snapshot: that file's rows
ETAG = f"{SOURCE_PREFIX}etag"
VERSION_ID = f"{SOURCE_PREFIX}version-id"
SIZE = f"{SOURCE_PREFIX}size"
TABLE = "wap.table"  # on every merge commit the service makes: the table it published to
TOTAL_ROWS = "wap.rows"
FILES = "wap.files"
SOURCES = "wap.sources"
DECISION_PREFIX = "wap.decision."
TABLES = "wap.tables"  # a multi-table load's merge: ",<ns>.<t>,<ns>.<t>," (wap.table names one table only)
LOAD = "wap.load"  # the manifest a load's merge published (its URI), and its identity
LOAD_IDENTITY = "wap.load.identity"
QUARANTINED_ROWS = "wap.quarantined.rows"  # rows of the published file set aside in QUARANTINE_TABLE
QUARANTINE_TABLE = "wap.quarantined.table"
WRITE = "wap.write"  # registered | rewritten (models.REGISTERED, models.REWRITTEN): how the engine took the file in
WRITE_REASON = "wap.write.reason"  # why (the file fits the table; or what needs the rewrite)
# A kept branch's ledger commit carries the merge that would publish it: the merge's properties under this prefix
# (so no history filter on main ever matches the branch's own commit) and its message.
PENDING = "wap.pending."
PENDING_MESSAGE = "wap.pending-message"

RECENT_APPENDS = 20  # how far back from a ref's current snapshot an append is looked for (a WAP branch's own)

Loaded = tuple[SourceObject, int]  # a source object and the rows it added


@dataclass(frozen=True)
class PublishedFile:
    """One file a merge commit published (alone, or as part of a batch)."""

    bucket: str
    key: str
    identity: str
    rows: int | None
    write: str | None = None  # a load's file: how it was written ("registered (...)"); a batch's: its merge's

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def source_properties(source: SourceObject) -> dict[str, str]:
    """The identity of one object version, as stamped on a lone file's snapshot and merge commit."""
    props = {BUCKET: source.bucket, KEY: source.key, IDENTITY: source.identity}
    if source.etag:
        props[ETAG] = source.etag.strip('"')
    if source.version_id:
        props[VERSION_ID] = source.version_id
    if source.size is not None:
        props[SIZE] = str(source.size)
    return props


def snapshot_properties(files: Sequence[Loaded]) -> dict[str, str]:
    """What the append's snapshot carries: the lone file's identity, or each file of a batch, numbered."""
    if len(files) == 1:
        return source_properties(files[0][0])
    props: dict[str, str] = {}
    for n, (source, rows) in enumerate(files):
        props[f"{IDENTITY}.{n}"] = source.identity
        props[f"{ROWS}.{n}"] = str(rows)
    return props


def merge_properties(table: TableRef, files: Sequence[Loaded]) -> dict[str, str]:
    """What the merge commit into main carries (what `wap history` shows)."""
    total = {TABLE: table.qualified, TOTAL_ROWS: str(sum(rows for _, rows in files))}
    if len(files) == 1:
        return source_properties(files[0][0]) | total
    listed = [{"bucket": s.bucket, "key": s.key, "identity": s.identity, "rows": rows} for s, rows in files]
    return total | {FILES: str(len(files)), SOURCES: json.dumps(listed, separators=(",", ":"))}


def write_properties(paths: Sequence[WritePath | None]) -> dict[str, str]:
    """How the engine took these files in (a snapshot's or a merge's): the one path they share, or none ({})."""
    found = set(paths)
    if len(found) != 1 or None in found:
        return {}
    (path,) = found
    assert path is not None
    return {WRITE: path.how, WRITE_REASON: path.reason}


def write_path(properties: Mapping[str, str]) -> WritePath | None:
    """The write path a snapshot or merge commit records, or None (written before it was recorded)."""
    how = properties.get(WRITE)
    return None if not how else WritePath(how, properties.get(WRITE_REASON, ""))


def quarantine_properties(quarantined: Quarantined | None) -> dict[str, str]:
    if quarantined is None:
        return {}
    return {QUARANTINED_ROWS: str(quarantined.rows), QUARANTINE_TABLE: quarantined.table}


def identities_in_snapshot(summary: Mapping[str, str]) -> dict[str, int]:
    """identity -> rows for every source a snapshot summary carries (a lone file's rows: `added-records`)."""
    found: dict[str, int] = {}
    for key, value in summary.items():
        if key == IDENTITY:
            found.setdefault(value, _int(summary.get("added-records")))
        elif key.startswith(f"{IDENTITY}."):
            n = key.removeprefix(f"{IDENTITY}.")
            found.setdefault(value, _int(summary.get(f"{ROWS}.{n}")))
    return found


def carries_identity(key: str) -> bool:
    """True for the summary keys that hold a source identity (alone or numbered)."""
    return key == IDENTITY or (key.startswith(f"{IDENTITY}.") and key.removeprefix(f"{IDENTITY}.").isdigit())


def load_properties(manifest: SourceObject, files: Sequence[tuple[SourceObject, TableRef, int]],
                    quarantined: Mapping[str, Quarantined] | None = None,
                    written: Mapping[str, WritePath] | None = None) -> dict[str, str]:
    """A multi-table load's merge commit: every table (so each table's history finds it), every file with its table
    and rows (and the rows a quarantine set aside, and how the engine wrote it), and the manifest."""
    tables = sorted({t.qualified for _, t, _ in files})
    moved, paths = quarantined or {}, written or {}
    listed = [{"bucket": s.bucket, "key": s.key, "identity": s.identity, "rows": rows, "table": t.qualified} | (
        {"quarantined": moved[s.identity].rows} if s.identity in moved else {}) | (
        {"write": str(paths[s.identity])} if s.identity in paths else {}) for s, t, rows in files]
    return {TABLES: f",{','.join(tables)},", TOTAL_ROWS: str(sum(rows for _, _, rows in files)),
            FILES: str(len(files)), SOURCES: json.dumps(listed, separators=(",", ":")), LOAD: manifest.uri,
            LOAD_IDENTITY: manifest.identity}


def published_files(properties: Mapping[str, str], table: TableRef | None = None) -> list[PublishedFile]:
    """The files a merge commit published (into `table`, when given): the lone file, or each entry of a batch's or
    a load's list; [] for other commits."""
    if SOURCES in properties:
        try:
            listed = json.loads(properties[SOURCES])
        except ValueError:
            return []
        if not isinstance(listed, list):
            return []
        return [PublishedFile(str(f.get("bucket", "")), str(f.get("key", "")), str(f.get("identity", "")),
                              _int_or_none(f.get("rows")), str(f["write"]) if f.get("write") else None)
                for f in listed if isinstance(f, dict) and (table is None or f.get("table") in (None, table.qualified))]
    if IDENTITY in properties or KEY in properties:
        return [PublishedFile(properties.get(BUCKET, ""), properties.get(KEY, ""), properties.get(IDENTITY, ""),
                              _int_or_none(properties.get(TOTAL_ROWS)))]
    return []


def tables_published(properties: Mapping[str, str]) -> list[str]:
    """The qualified names of the tables a merge commit published to (a load's several, or the one `wap.table`)."""
    if TABLES in properties:
        return [t for t in properties[TABLES].split(",") if t]
    return [properties[TABLE]] if TABLE in properties else []


def published_by_table(properties: Mapping[str, str]) -> list[tuple[str, PublishedFile]]:
    """(qualified table, file) for every file a merge commit published."""
    if SOURCES in properties and TABLES in properties:
        try:
            listed = json.loads(properties[SOURCES])
        except ValueError:
            return []
        tables = {f.get("identity"): str(f.get("table")) for f in listed if isinstance(f, dict)} \
            if isinstance(listed, list) else {}
        return [(tables.get(f.identity, ""), f) for f in published_files(properties)]
    table = properties.get(TABLE, "")
    return [(table, f) for f in published_files(properties)]


def pending_properties(message: str, properties: Mapping[str, str]) -> dict[str, str]:
    """What a kept branch's ledger commit carries: the merge that would publish the branch (see PENDING)."""
    return {f"{PENDING}{k}": v for k, v in properties.items()} | {PENDING_MESSAGE: message}


def planned_merge(properties: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """(message, properties) of the merge a kept branch's ledger commit planned, or None for another commit."""
    if PENDING_MESSAGE not in properties:
        return None
    return properties[PENDING_MESSAGE], {k.removeprefix(PENDING): v for k, v in properties.items()
                                         if k.startswith(PENDING)}


def is_batch(properties: Mapping[str, str]) -> bool:
    return SOURCES in properties


def load_rows(properties: Mapping[str, str], table: TableRef | None = None) -> list[int]:
    """The rows of each file a merge published into `table` (a batch merge counts each of its files as one load)."""
    if is_batch(properties):
        return [f.rows for f in published_files(properties, table) if f.rows is not None]
    rows = _int_or_none(properties.get(TOTAL_ROWS))
    return [] if rows is None else [rows]


def source_uri(properties: Mapping[str, str]) -> str | None:
    bucket, key = properties.get(BUCKET), properties.get(KEY)
    return f"s3://{bucket}/{key}" if bucket and key else None


def source_of(properties: Mapping[str, str]) -> dict[str, str]:
    """Only the `wap.source.*` properties (what a reviewed publish copies onto its merge commit)."""
    return {k: v for k, v in properties.items() if k.startswith(SOURCE_PREFIX)}


def _int(value: object) -> int:
    found = _int_or_none(value)
    return 0 if found is None else found


def _int_or_none(value: object) -> int | None:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else None
