"""A boto3 S3 client's GetObject in memory, for the real S3ObjectStore in unit tests (its ranged, parallel
downloads): it serves the bytes a FakeObjectStore holds, exactly the ranges asked, and records each request."""

from __future__ import annotations

import io
import threading
from typing import Any

from tests.fakes import FakeObjectStore


class FakeS3Client:
    def __init__(self, objects: FakeObjectStore) -> None:
        self.objects = objects
        self.ranges: list[str | None] = []  # the Range of each GetObject served (None: the whole object)
        self._lock = threading.Lock()

    def get_object(self, *, Bucket: str, Key: str, Range: str | None = None, **exact: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        content = self.objects.objects[(Bucket, Key)]
        assert isinstance(content, bytes), "FakeS3Client serves the objects a test put as bytes"
        body = content
        if Range is not None:
            start, end = (int(p) for p in Range.removeprefix("bytes=").split("-"))
            body = content[start:end + 1]
        with self._lock:
            self.ranges.append(Range)
        return {"Body": io.BytesIO(body)}

    @property
    def served(self) -> int:
        with self._lock:
            return len(self.ranges)
