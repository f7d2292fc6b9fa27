"""wap_stack/moto_ranges.py: the stack's moto serves a GET of one byte range by reading only that range, and answers
every request exactly as moto itself does (a differential test against moto unpatched)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.s3.models import s3_backends

from wap_stack.moto_ranges import installed, one_range

BODY = bytes(range(256)) * 4096 + b"tail"  # 1 MiB and 4 bytes
RANGES = ["bytes=0-0", "bytes=0-99", "bytes=100-", "bytes=-4", "bytes=-2000000", "bytes=1048570-", "bytes=5-2",
          "bytes=1048580-1048590", "bytes=0-1048579", "bytes=0-99,200-299", "bytes=x-y", "bytes=-0", "chunks=0-9", ""]


def _answers(s3: Any) -> list[Any]:
    """What moto answers to each request of the differential: status and body, or the error."""
    found: list[Any] = []
    version = s3.put_object(Bucket="bkt", Key="k", Body=BODY).get("VersionId")
    s3.put_object(Bucket="bkt", Key="k", Body=b"newer")
    for byte_range in RANGES:
        for extra in ({}, {"VersionId": version} if version else {}, {"PartNumber": 1}):
            try:
                answer = s3.get_object(Bucket="bkt", Key="k", Range=byte_range, **extra)
                found.append((byte_range, sorted(extra), answer["ResponseMetadata"]["HTTPStatusCode"],
                              answer.get("ContentRange"), answer["Body"].read()))
            except ClientError as exc:
                found.append((byte_range, sorted(extra), exc.response["Error"]["Code"]))
        try:
            found.append((byte_range, s3.head_object(Bucket="bkt", Key="k", Range=byte_range).get("ContentLength")))
        except ClientError as exc:
            found.append((byte_range, exc.response["Error"]["Code"]))
    found.append(s3.get_object(Bucket="bkt", Key="k")["Body"].read())
    return found


@pytest.fixture()
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # a stack test in this worker may have set it
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        client.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
        yield client


def test_every_answer_is_the_one_moto_gives(s3: Any) -> None:
    unpatched = _answers(s3)
    with installed():
        patched = _answers(s3)
    assert patched == unpatched
    assert any(len(a) == 5 and a[2] == 206 for a in patched)  # ranges were served


def test_a_ranged_get_reads_only_its_range(s3: Any) -> None:
    s3.put_object(Bucket="bkt", Key="big", Body=BODY)
    # moto's account is the caller's (the access key may name one): the bucket is found in whichever holds it
    key = next(backend.buckets["bkt"].keys["big"] for account in list(s3_backends.values())
               for backend in [account["global"]] if "bkt" in backend.buckets and "big" in backend.buckets["bkt"].keys)
    reads: list[int] = []
    buffer = key._value_buffer
    real_read = buffer.read

    def read(size: int = -1) -> bytes:
        data: bytes = real_read(size)
        reads.append(len(data))
        return data

    buffer.read = read
    try:
        with installed():
            assert s3.get_object(Bucket="bkt", Key="big", Range="bytes=10-19")["Body"].read() == BODY[10:20]
            assert s3.get_object(Bucket="bkt", Key="big", Range="bytes=-4")["Body"].read() == b"tail"
            ranged = list(reads)
        reads.clear()
        assert s3.get_object(Bucket="bkt", Key="big", Range="bytes=10-19")["Body"].read() == BODY[10:20]
    finally:
        del buffer.read
    assert ranged == [10, 4]  # the ranges alone
    assert reads == [len(BODY)]  # moto's own: the whole object for 10 bytes


def test_one_range_is_a_single_byte_range() -> None:
    assert [one_range(h) for h in ("bytes=0-9", "bytes=5-", "bytes=-5", "bytes=-", "bytes=0-1,4-5", "x", None)] == [
        True, True, True, False, False, False, False]
