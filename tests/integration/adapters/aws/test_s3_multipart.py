"""A file uploaded in parts (as `aws s3 cp` does above 8 MB) is downloaded intact from the local stack's moto."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig

from tests.conftest import Lake

pytestmark = [pytest.mark.stack]


def test_a_multipart_upload_downloads_intact(lake: Lake, tmp_path: Path, table_name: str) -> None:
    data = os.urandom(12 * 1024 * 1024)
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    key = f"{table_name}/big.csv"
    lake.s3.upload_file(str(local), lake.inbox_bucket, key,
                        Config=TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024))
    assert lake.s3.head_object(Bucket=lake.inbox_bucket, Key=key)["ETag"].strip('"').endswith("-3")  # 3 parts
    source = lake.service.objects.head(lake.inbox_bucket, key)
    downloaded = lake.service.objects.download(source, tmp_path / "downloads")
    assert hashlib.sha256(downloaded.read_bytes()).digest() == hashlib.sha256(data).digest()
