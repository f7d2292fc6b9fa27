"""What the service measured of a Parquet file from its decoded pages (parquet_measuring, in the isolation worker):
the figures the register path audits and commits as the data file's metrics, never the file's own claims.

`Measured.problem` says why the file cannot be registered with them: a claim of the file that its pages contradict
(`DISAGREE`), or one the service does not check. The file is then rewritten by the engine (or refused under
`write: register`). Plain data, picklable, no pyarrow: it crosses from the worker to the function's process.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wap_ingest.adapters.formats import ThriftError

DISAGREE = "footer statistics disagree with the pages"


@dataclass(frozen=True)
class LeafFigures:
    """One leaf column over the whole file, as measured."""

    path: str  # Parquet's path in schema (`a.b`, `l.list.element`)
    physical: str
    values: int
    nulls: int
    nans: int | None  # None: not a floating-point column
    low: Any  # logical bounds without nulls and NaNs (None: no such value, or inside a list or map)
    high: Any
    repeated: bool
    compressed: int  # the bytes of its chunks (the pages the decoder read)


@dataclass(frozen=True)
class Measured:
    rows: int
    leaves: tuple[LeafFigures, ...]
    split_offsets: tuple[int, ...]
    footer_digest: str  # sha256 of the footer the pages were decoded with
    problem: str = ""  # why the file cannot be registered with these figures ("" when every claim held)


def footer_digest(footer: bytes) -> str:
    return hashlib.sha256(footer).hexdigest()


def file_footer(path: Path) -> bytes:
    """The Thrift FileMetaData of a local Parquet file (its footer's bytes)."""
    with path.open("rb") as file:
        size = file.seek(0, 2)
        if size < 12:
            raise ThriftError("the file is too short for a Parquet footer")
        file.seek(size - 8)
        tail = file.read(8)
        length = int.from_bytes(tail[:4], "little")
        if length > size - 12:
            raise ThriftError("its footer length does not fit the file")
        file.seek(size - 8 - length)
        return file.read(length)


