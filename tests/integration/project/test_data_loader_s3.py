"""data_loader.py against a real S3 API over HTTP: a moto server started for this module."""

from __future__ import annotations

import io
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import data_loader  # importable from the repository root (pytest pythonpath)
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

pytestmark = pytest.mark.stack

SCHEMA = pa.schema([("my_col_0", pa.int32()), ("my_col_1", pa.string()), ("my_col_2", pa.float64())])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _isolate_aws_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "SOURCE_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    _isolate_aws_env(monkeypatch, moto_endpoint)
    return boto3.client("s3")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"source-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def _uris(stdout: str, bucket: str) -> list[str]:
    keys = []
    for line in stdout.splitlines():
        assert line.startswith(f"s3://{bucket}/"), line
        keys.append(line.removeprefix(f"s3://{bucket}/"))
    return keys


def test_parquet_files_land_in_the_bucket(s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert data_loader.main(["--bucket", bucket, "--files", "3", "-n", "50", "--format", "parquet"]) == 0
    keys = _uris(capsys.readouterr().out, bucket)
    assert len(keys) == len(set(keys)) == 3
    listed = {obj["Key"] for obj in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed == set(keys)
    for key in keys:
        assert key.startswith("customer_data_log/")
        assert key.endswith(".parquet")
        obj = s3.get_object(Bucket=bucket, Key=key)
        assert obj["ContentType"] == "application/vnd.apache.parquet"
        table = pq.read_table(io.BytesIO(obj["Body"].read()))
        assert table.schema.equals(SCHEMA)
        assert table.num_rows == 50
        assert table.column("my_col_1").null_count == 5


def test_csv_files_land_in_the_bucket(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_BUCKET", bucket)  # the default for --bucket
    argv = ["--files", "3", "-n", "40", "--format", "csv", "--table", "orders", "--no-null", "--verbose"]
    assert data_loader.main(argv) == 0
    captured = capsys.readouterr()
    keys = _uris(captured.out, bucket)
    assert len(keys) == len(set(keys)) == 3
    assert len(captured.err.splitlines()) == 3
    for key in keys:
        assert key.startswith("orders/")
        assert key.endswith(".csv")
        obj = s3.get_object(Bucket=bucket, Key=key)
        assert obj["ContentType"] == "text/csv"
        table = pa_csv.read_csv(
            io.BytesIO(obj["Body"].read()),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict(zip(SCHEMA.names, SCHEMA.types, strict=True)), strings_can_be_null=True
            ),
        )
        assert table.schema.equals(SCHEMA)
        assert table.num_rows == 40
        assert table.column("my_col_1").null_count == 0


def test_seeded_runs_write_the_same_objects(s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--bucket", bucket, "--files", "2", "-n", "5", "--seed", "7"]
    assert data_loader.main(argv) == 0
    keys = _uris(capsys.readouterr().out, bucket)
    first = [s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys]
    assert first[0] != first[1]
    # Same seed: the 8-hex part of the keys and the data repeat (the timestamp may tick).
    assert data_loader.main(argv) == 0
    again = _uris(capsys.readouterr().out, bucket)
    assert [k.split("Z-", 1)[1] for k in again] == [k.split("Z-", 1)[1] for k in keys]
    assert [s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in again] == first


def test_missing_bucket_exits_one_with_one_line(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    missing = f"missing-{uuid.uuid4().hex[:12]}"
    assert data_loader.main(["--bucket", missing, "--files", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert f"s3://{missing}" in captured.err
    assert "does not exist" in captured.err
    assert "Traceback" not in captured.err


def test_unreachable_endpoint_exits_one_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = f"http://127.0.0.1:{_free_port()}"  # nothing listens there any more
    _isolate_aws_env(monkeypatch, closed)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # no retries with backoff: fail fast
    assert data_loader.main(["--bucket", "anything"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert "cannot reach the S3 endpoint" in captured.err
    assert closed in captured.err
    assert "s3://anything" in captured.err
    assert "Traceback" not in captured.err
