"""What registering a file needs of S3 (adapters/aws/s3.py, issue 27), against the local stack's moto server: the tail
of exactly the announced version, and a server-side copy of exactly that version into the lake (in parts, in parallel,
above one CopyObject's limit), with S3's failures judged as the other S3 calls' are."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.aws import s3 as s3_adapter
from wap_ingest.core.errors import ConfigError, EmptySourceError, SourceNotFoundError
from wap_ingest.core.models import SourceObject

pytestmark = [pytest.mark.stack]
VERSIONED = "versioned-inbox"


@pytest.fixture
def versioned(lake: Lake) -> str:
    lake.s3.create_bucket(Bucket=VERSIONED)
    lake.s3.put_bucket_versioning(Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"})
    return VERSIONED


def lake_bytes(lake: Lake, uri: str) -> bytes:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bytes(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def test_the_tail_and_the_copy_are_of_the_announced_version(lake: Lake, versioned: str, table_name: str) -> None:
    key = f"{table_name}/f.parquet"
    first = lake.s3.put_object(Bucket=versioned, Key=key, Body=b"A" * 1000 + b"first-tail")
    lake.s3.put_object(Bucket=versioned, Key=key, Body=b"B" * 10 + b"second")
    source = SourceObject(versioned, key, size=1010, version_id=first["VersionId"])
    objects = lake.service.objects
    assert objects.read_tail(source, 10) == (b"first-tail", 1010)
    assert objects.read_tail(source, 5000) == (b"A" * 1000 + b"first-tail", 1010)  # smaller than asked: all of it
    target = f"s3://{lake.env['LAKE_BUCKET']}/warehouse/{table_name}/data/copied.parquet"
    objects.copy_into(source, target)
    assert lake_bytes(lake, target) == b"A" * 1000 + b"first-tail"


def test_a_changed_unversioned_object_is_refused_by_its_etag(lake: Lake, table_name: str) -> None:
    """(The copy sends the same guard, CopySourceIfMatch, which moto does not check; S3 does.)"""
    source = lake.put(f"{table_name}/f.parquet", b"old bytes")
    announced = lake.service.objects.head(source.bucket, source.key)
    lake.put(source.key, b"new bytes!")
    with pytest.raises(SourceNotFoundError, match="changed since it was announced"):
        lake.service.objects.read_tail(announced, 100)


def test_an_empty_or_missing_source_is_the_files_fault_and_a_missing_lake_a_setting(lake: Lake,
                                                                                    table_name: str) -> None:
    empty = lake.service.objects.head(*lake.put(f"{table_name}/empty.parquet", b"").uri[5:].split("/", 1))
    with pytest.raises(EmptySourceError, match="the object is empty"):
        lake.service.objects.read_tail(empty, 100)
    gone = SourceObject(lake.inbox_bucket, f"{table_name}/never.parquet")
    with pytest.raises(SourceNotFoundError):
        lake.service.objects.read_tail(gone, 100)
    there = lake.put(f"{table_name}/there.parquet", b"data")
    with pytest.raises(ConfigError, match="LAKE_BUCKET"):
        lake.service.objects.copy_into(there, f"s3://no-such-lake-{table_name}/k.parquet")


def test_a_copy_above_one_copyobjects_limit_goes_in_parts_and_leaves_no_upload_behind(
        lake: Lake, versioned: str, table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_adapter, "COPY_MAX_BYTES", 5 * 1024 * 1024)  # S3's smallest part: 5 MiB
    monkeypatch.setattr(s3_adapter, "COPY_PART_BYTES", 5 * 1024 * 1024)
    data = os.urandom(12 * 1024 * 1024 + 17)
    key = f"{table_name}/big.parquet"
    put = lake.s3.put_object(Bucket=versioned, Key=key, Body=data)
    lake.s3.put_object(Bucket=versioned, Key=key, Body=b"a newer version")
    source = SourceObject(versioned, key, size=len(data), version_id=put["VersionId"])
    lake_bucket = lake.env["LAKE_BUCKET"]
    target = f"s3://{lake_bucket}/warehouse/{table_name}/data/big.parquet"
    lake.service.objects.copy_into(source, target)
    assert lake_bytes(lake, target) == data
    head = lake.s3.head_object(Bucket=lake_bucket, Key=target.split("/", 3)[3])
    assert head["ETag"].strip('"').endswith("-3")  # three parts
    assert not lake.s3.list_multipart_uploads(Bucket=lake_bucket).get("Uploads")


class _Counted:
    """The service's S3 client, counting its GETs."""

    def __init__(self, client: object) -> None:
        self._client, self.gets = client, 0

    def get_object(self, **kwargs: object) -> object:
        self.gets += 1
        return self._client.get_object(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_a_small_parquet_file_is_weighed_judged_and_downloaded_from_one_get(lake: Lake, versioned: str,
                                                                             table_name: str, tmp_path: object
                                                                             ) -> None:
    import io
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from wap_ingest.adapters.engine.register import read_footer
    from wap_ingest.core.models import FileFormat

    data = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(500)), "name": [f"n{i}" for i in range(500)]}), data)
    key = f"{table_name}/small.parquet"
    first = lake.s3.put_object(Bucket=versioned, Key=key, Body=data.getvalue())
    lake.s3.put_object(Bucket=versioned, Key=key, Body=b"a newer version of the key")
    counted = _Counted(lake.service.objects.client)
    store = s3_adapter.S3ObjectStore(counted)
    source = store.head(versioned, key, first["VersionId"])
    weight = store.weigh(source, FileFormat.PARQUET)
    footer, size = read_footer(store, source)
    staged = store.download(source, Path(str(tmp_path)))
    assert counted.gets == 1  # the weighing's read of its tail, which was all of it
    assert staged.read_bytes() == data.getvalue() and size == len(data.getvalue())  # that version, not the newer
    assert footer.rows == 500 and weight.processed > 0
    newer = store.head(versioned, key)  # the newer version is its own: read from S3
    assert store.read_tail(newer, 6) == (b"of the key"[-6:], 26) and counted.gets == 2
