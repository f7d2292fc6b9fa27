"""One behaviour suite for the ObjectStore port, run against the in-memory fake and S3ObjectStore on the stack's
moto server over HTTP: an object's version (size, ETag), a missing object, listings in key order under a prefix."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.fakes import FakeObjectStore
from wap_ingest.core.errors import SourceNotFoundError, UnreadableSourceError
from wap_ingest.core.models import SourceObject
from wap_ingest.core.ports import ObjectStore


@dataclass
class Harness:
    store: ObjectStore
    bucket: str
    put: Callable[[str, bytes], None]  # (key, body), outside the port


@pytest.fixture(params=["fake", pytest.param("s3", marks=pytest.mark.stack)])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "fake":
        fake = FakeObjectStore()

        def put(key: str, body: bytes) -> None:
            fake.put("inbox", key, body)

        yield Harness(fake, "inbox", put)
        return
    from wap_ingest.adapters.aws.s3 import S3ObjectStore

    s3, bucket = request.getfixturevalue("stack_s3"), request.getfixturevalue("fresh_bucket")
    yield Harness(S3ObjectStore(s3), bucket, lambda key, body: s3.put_object(Bucket=bucket, Key=key, Body=body))


def test_head_gives_the_size_and_etag_of_the_current_version(harness: Harness) -> None:
    body = b"a,b\n1,2\n"
    harness.put("t/one.csv", body)
    head = harness.store.head(harness.bucket, "t/one.csv")
    assert (head.bucket, head.key, head.size) == (harness.bucket, "t/one.csv", len(body))
    assert head.etag == hashlib.md5(body).hexdigest()  # S3's ETag of a single-part upload, without quotes
    assert harness.store.head(harness.bucket, "t/one.csv").identity == head.identity  # stable
    harness.put("t/one.csv", body + b"3,4\n")
    newer = harness.store.head(harness.bucket, "t/one.csv")
    assert newer.size == len(body) + 4 and newer.identity != head.identity  # a new version, a new identity


def test_head_of_a_missing_object_raises_source_not_found(harness: Harness) -> None:
    harness.put("t/present.csv", b"x")
    with pytest.raises(SourceNotFoundError, match=r"absent\.csv"):
        harness.store.head(harness.bucket, "t/absent.csv")
    with pytest.raises(SourceNotFoundError):
        harness.store.head(f"no-such-bucket-{uuid.uuid4().hex[:8]}", "t/present.csv")


def test_a_zero_byte_object_has_size_zero(harness: Harness) -> None:
    harness.put("t/empty.csv", b"")
    assert harness.store.head(harness.bucket, "t/empty.csv").size == 0


def test_list_objects_is_every_object_under_the_prefix_in_key_order(harness: Harness) -> None:
    for key in ("t/b.csv", "t/a/2.csv", "t/a/10.csv", "tt/x.csv", "u/t/y.csv", "t/Z.csv"):
        harness.put(key, key.encode())
    listed = harness.store.list_objects(harness.bucket, "t/")
    assert [o.key for o in listed] == ["t/Z.csv", "t/a/10.csv", "t/a/2.csv", "t/b.csv"]  # byte order, not natural
    for found in listed:
        assert found.bucket == harness.bucket and found.size == len(found.key.encode())
        assert found.etag == harness.store.head(harness.bucket, found.key).etag
    assert [o.key for o in harness.store.list_objects(harness.bucket, "t")] == [
        "t/Z.csv", "t/a/10.csv", "t/a/2.csv", "t/b.csv", "tt/x.csv"]
    assert harness.store.list_objects(harness.bucket, "nothing/") == []


def test_list_objects_skips_folder_markers(harness: Harness) -> None:
    harness.put("t/folder/", b"")  # what the S3 console's "Create folder" writes
    harness.put("t/folder/a.csv", b"a")
    assert [o.key for o in harness.store.list_objects(harness.bucket, "t/")] == ["t/folder/a.csv"]


def test_read_bytes_gives_the_headed_version_and_refuses_a_large_or_missing_one(harness: Harness) -> None:
    harness.put("_loads/m.json", b'{"files": []}')
    head = harness.store.head(harness.bucket, "_loads/m.json")
    assert harness.store.read_bytes(head, 1024) == b'{"files": []}'
    with pytest.raises(UnreadableSourceError, match="too large for a manifest"):
        harness.store.read_bytes(head, 5)
    with pytest.raises(SourceNotFoundError):
        harness.store.read_bytes(SourceObject(harness.bucket, "_loads/absent.json"), 1024)
