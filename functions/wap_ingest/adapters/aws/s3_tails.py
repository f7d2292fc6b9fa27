"""The tails of source versions the object store read (adapters.aws.s3.S3ObjectStore), kept a little while.

A Parquet source's tail is asked for twice per file: routing weighs the file from its footer (adapters/formats/weights:
the last 64 KiB), then the register path reads the footer again to judge it (engine/register.read_footer), and a file
smaller than the tail is then downloaded whole for its pages to be decoded. Three GETs of the same bytes of the same
version: for a small file, 10 to 20 ms of its run. The store keeps the last TAILS_KEPT tails it read, each with the
object's size as S3 reported it, by the version's identity (its version id, else its ETag): a later read of that
version's tail, or of the whole of it when the tail was all of it, is answered from here.

Only what S3 answered for exactly that version is kept: a read that named no version (a source with neither a
version id nor an ETag) is never kept, and a tail is never larger than KEEP_AT_MOST.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from wap_ingest.core.models import SourceObject

TAILS_KEPT = 8
KEEP_AT_MOST = 1024 * 1024


class Tails:
    """The last tails read, by exact version: (the tail's bytes, the object's size)."""

    def __init__(self, kept: int = TAILS_KEPT, largest: int = KEEP_AT_MOST) -> None:
        self._kept, self._largest = kept, largest
        self._lock = threading.Lock()
        self._tails: OrderedDict[tuple[str, str, str, int], tuple[bytes, int]] = OrderedDict()

    @staticmethod
    def _version(source: SourceObject) -> tuple[str, str, str, int] | None:
        marker = source.version_id or source.etag
        return None if not marker or source.size is None else (source.bucket, source.key, marker, source.size)

    def keep(self, source: SourceObject, tail: bytes, size: int) -> None:
        """`tail` is the last len(tail) bytes of exactly `source`'s version, which is `size` bytes long."""
        version = self._version(source)
        if version is None or size != source.size or len(tail) > min(size, self._largest):
            return
        with self._lock:
            known = self._tails.pop(version, None)
            if known is not None and len(known[0]) > len(tail):
                tail = known[0]  # the longer of the two tails of the one version
            self._tails[version] = (tail, size)
            while len(self._tails) > self._kept:
                self._tails.popitem(last=False)

    def tail(self, source: SourceObject, max_bytes: int) -> tuple[bytes, int] | None:
        """The last `max_bytes` bytes of the version (all of it when smaller) and its size, if a kept tail has them."""
        version = self._version(source)
        with self._lock:
            known = None if version is None else self._tails.get(version)
        if known is None or len(known[0]) < min(max_bytes, known[1]):
            return None
        return known[0][-max_bytes:], known[1]

    def whole(self, source: SourceObject) -> bytes | None:
        """All of the version's bytes, if a kept tail is all of it."""
        known = self.tail(source, source.size or 0) if source.size else None
        return None if known is None or len(known[0]) != known[1] else known[0]
