"""The files a register path commit writes (adapters/catalog/lake_io.py): each one PutObject when closed, its length
known without a HEAD, and "do not overwrite" S3's own conditional put, against the local stack's moto."""

from __future__ import annotations

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.catalog.lake_io import put_file_io

pytestmark = [pytest.mark.stack]


def test_a_commit_file_is_one_put_of_its_bytes_and_refuses_to_overwrite(lake: Lake, table_name: str) -> None:
    objects = lake.service.objects
    puts: list[tuple[str, int, bool]] = []

    def put(uri: str, data: bytes, *, overwrite: bool) -> None:
        puts.append((uri, len(data), overwrite))
        objects.write(uri, data, overwrite=overwrite)

    file_io = put_file_io({"s3.endpoint": lake.env["AWS_ENDPOINT_URL"], "s3.region": lake.env["AWS_REGION"]}, put)
    uri = f"s3://{lake.env['LAKE_BUCKET']}/warehouse/{table_name}/metadata/00001.metadata.json"
    output = file_io.new_output(uri)
    with output.create(overwrite=False) as stream:
        stream.write(b'{"format-version": 2}')
        assert puts == []  # nothing sent before the file is closed
    assert puts == [(uri, 21, False)] and len(output) == 21
    assert file_io.new_input(uri).open().read() == b'{"format-version": 2}'  # read back by PyArrow
    with pytest.raises(FileExistsError), file_io.new_output(uri).create(overwrite=False) as stream:
        stream.write(b"another")
    with file_io.new_output(uri).create(overwrite=True) as stream:
        stream.write(b"replaced")
    assert file_io.new_input(uri).open().read() == b"replaced"
