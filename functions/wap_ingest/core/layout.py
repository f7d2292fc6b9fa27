"""A table's layout (issue 15, item 1): its partition spec (Iceberg transforms), sort order and write properties, from
the `layout:` key of its entry in the audits file. The engine applies it when it creates the table, and, when the
layout of an existing table changes, as partition/sort evolution on the run's branch (audited with the file and
merged with it, like any change).

    layout:
      partition_by: [day(ordered_at), bucket(16, customer_id), region, truncate(4, sku)]
      sort_by: [ordered_at, customer_id desc]
      target_file_size_mb: 128
      codec: zstd
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import AuditSuiteError

TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate")
CODECS = ("zstd", "snappy", "gzip", "lz4", "uncompressed")
KEYS = ("partition_by", "sort_by", "target_file_size_mb", "codec")
_COLUMN = r"[A-Za-z_][A-Za-z0-9_]*"
_FIELD = re.compile(rf"^\s*(?:(?P<t>year|month|day|hour)\(\s*(?P<c1>{_COLUMN})\s*\)|"
                    rf"(?P<w>bucket|truncate)\(\s*(?P<n>\d+)\s*,\s*(?P<c2>{_COLUMN})\s*\)|(?P<c3>{_COLUMN}))\s*$")
_SORT = re.compile(rf"^\s*(?P<c>{_COLUMN})(?:\s+(?P<d>asc|desc))?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PartitionField:
    transform: str  # one of TRANSFORMS
    column: str
    width: int | None = None  # bucket's N, truncate's W

    @property
    def iceberg(self) -> str:
        """Iceberg's name of the transform (`bucket[16]`, `day`, `identity`), as a spec prints it."""
        return f"{self.transform}[{self.width}]" if self.width is not None else self.transform


@dataclass(frozen=True)
class SortField:
    column: str
    descending: bool = False


@dataclass(frozen=True)
class Layout:
    partition: tuple[PartitionField, ...] = ()
    sort: tuple[SortField, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()  # Iceberg table properties

    def __bool__(self) -> bool:
        return bool(self.partition or self.sort or self.properties)


NO_LAYOUT = Layout()


def layout_from(raw: object, table: str) -> Layout:
    where = f"audits file: table {table!r}: layout"
    if not isinstance(raw, Mapping):
        raise AuditSuiteError(f"{where} must be a mapping with {', '.join(KEYS)}, got {raw!r}.")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise AuditSuiteError(f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(KEYS)}.")
    partition = tuple(_partition_field(value, where) for value in _strings(raw.get("partition_by", []), where,
                                                                            "partition_by"))
    if len({p.column for p in partition}) != len(partition):
        raise AuditSuiteError(f"{where}: partition_by names a column twice; keep one transform per column.")
    sort = tuple(_sort_field(value, where) for value in _strings(raw.get("sort_by", []), where, "sort_by"))
    properties: dict[str, str] = {}
    size = raw.get("target_file_size_mb")
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 4096:
            raise AuditSuiteError(f"{where}: target_file_size_mb must be a whole number of MiB from 1 to 4096, got "
                                  f"{size!r}.")
        properties["write.target-file-size-bytes"] = str(size * 1024 * 1024)
    codec = raw.get("codec")
    if codec is not None:
        if codec not in CODECS:
            raise AuditSuiteError(f"{where}: codec must be one of {', '.join(CODECS)}, got {codec!r}.")
        properties["write.parquet.compression-codec"] = str(codec)
    return Layout(partition, sort, tuple(sorted(properties.items())))


def _strings(value: object, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuditSuiteError(f"{where}: {key} must be a list such as [day(ordered_at), region], got {value!r}.")
    return list(value)


def _partition_field(text: str, where: str) -> PartitionField:
    found = _FIELD.match(text)
    if found is None:
        raise AuditSuiteError(f"{where}: partition_by entry {text!r} is not a column or a transform; use column, "
                              f"year(c), month(c), day(c), hour(c), bucket(N, c) or truncate(W, c).")
    if found["c3"]:
        return PartitionField("identity", found["c3"].lower())
    if found["t"]:
        return PartitionField(found["t"], found["c1"].lower())
    width = int(found["n"])
    if width < 1:
        raise AuditSuiteError(f"{where}: {text!r}: {found['w']} needs a width of at least 1.")
    return PartitionField(found["w"], found["c2"].lower(), width)


def _sort_field(text: str, where: str) -> SortField:
    found = _SORT.match(text)
    if found is None:
        raise AuditSuiteError(f"{where}: sort_by entry {text!r} must be a column, optionally followed by asc or desc.")
    return SortField(found["c"].lower(), (found["d"] or "asc").lower() == "desc")
