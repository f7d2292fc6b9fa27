"""Unit tests for the synthetic producer (data_loader.py at the repository root); no network."""

from __future__ import annotations

import io
import random
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import data_loader  # importable from the repository root (pytest pythonpath)
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

NOW = datetime(2026, 11, 21, 23, 59, 59, tzinfo=UTC)
KEY_RE = re.compile(r"^customer_data_log/2026-11-21T23-59-59Z-[0-9a-f]{8}-(?P<index>\d+)\.(?P<fmt>parquet|csv)$")


class Recorder:
    """Stands in for `upload`: records the calls, returns the URI."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, client: object, bucket: str, key: str, body: bytes, content_type: str) -> str:
        self.calls.append({"bucket": bucket, "key": key, "body": body, "content_type": content_type})
        return f"s3://{bucket}/{key}"


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(data_loader, "upload", rec)
    monkeypatch.setattr(data_loader, "s3_client", lambda: object())
    monkeypatch.setattr(data_loader, "utc_now", lambda: NOW)
    monkeypatch.delenv("SOURCE_BUCKET", raising=False)
    return rec


# ---------------------------------------------------------------------------- make_rows


def test_schema_and_types() -> None:
    table = data_loader.make_rows(50, True, random.Random(7))
    assert table.schema.names == ["my_col_0", "my_col_1", "my_col_2"]
    assert table.schema.field("my_col_0").type == pa.int32()
    assert table.schema.field("my_col_1").type == pa.string()
    assert table.schema.field("my_col_2").type == pa.float64()
    assert table.num_rows == 50
    assert table.column("my_col_0").null_count == 0
    assert table.column("my_col_2").null_count == 0


@pytest.mark.parametrize("seed", [0, 1, 42, 2026])
def test_null_share_with_nulls(seed: int) -> None:
    table = data_loader.make_rows(1000, True, random.Random(seed))
    assert table.column("my_col_1").null_count == 100


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_no_nulls_with_no_null(seed: int) -> None:
    table = data_loader.make_rows(1000, False, random.Random(seed))
    assert table.column("my_col_1").null_count == 0


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 9])
def test_at_least_one_null_for_tiny_files(rows: int) -> None:
    table = data_loader.make_rows(rows, True, random.Random(3))
    assert table.num_rows == rows
    assert table.column("my_col_1").null_count == 1


def test_make_rows_is_reproducible_with_a_seed() -> None:
    assert data_loader.make_rows(200, True, random.Random(5)).equals(data_loader.make_rows(200, True, random.Random(5)))
    assert not data_loader.make_rows(200, True, random.Random(5)).equals(
        data_loader.make_rows(200, True, random.Random(6))
    )


def test_make_rows_rejects_zero_rows() -> None:
    with pytest.raises(ValueError, match="rows must be >= 1"):
        data_loader.make_rows(0, True, random.Random(0))


# ---------------------------------------------------------------------------- encode


def test_parquet_round_trip() -> None:
    table = data_loader.make_rows(120, True, random.Random(11))
    back = pq.read_table(io.BytesIO(data_loader.encode(table, "parquet")))
    assert back.schema.equals(table.schema)
    assert back.equals(table)


def test_csv_round_trip_nulls_are_empty() -> None:
    table = data_loader.make_rows(120, True, random.Random(11))
    body = data_loader.encode(table, "csv")
    lines = body.decode().splitlines()
    assert lines[0] == '"my_col_0","my_col_1","my_col_2"'
    assert len(lines) == 121
    null_lines = [line for line in lines[1:] if line.split(",")[1] == ""]
    assert len(null_lines) == table.column("my_col_1").null_count == 12

    back = pa_csv.read_csv(
        io.BytesIO(body),
        convert_options=pa_csv.ConvertOptions(
            column_types={"my_col_0": pa.int32(), "my_col_1": pa.string(), "my_col_2": pa.float64()},
            strings_can_be_null=True,
        ),
    )
    assert back.schema.equals(table.schema)
    assert back.equals(table)


def test_encode_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="unsupported format"):
        data_loader.encode(data_loader.make_rows(1, True, random.Random(0)), "json")


# ---------------------------------------------------------------------------- object_key


def test_object_key_shape() -> None:
    key = data_loader.object_key("customer_data_log", 2, "parquet", NOW, random.Random(1))
    match = KEY_RE.match(key)
    assert match, key
    assert match["index"] == "2"


def test_object_key_converts_to_utc() -> None:
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    key = data_loader.object_key("t", 0, "csv", plus_two, random.Random(1))
    assert key.startswith("t/2026-11-21T23-59-59Z-")
    assert key.endswith("-0.csv")


def test_object_keys_reproducible_with_a_seed() -> None:
    first = [data_loader.object_key("t", i, "parquet", NOW, rng) for rng in [random.Random(9)] for i in range(3)]
    again = [data_loader.object_key("t", i, "parquet", NOW, rng) for rng in [random.Random(9)] for i in range(3)]
    other = [data_loader.object_key("t", i, "parquet", NOW, rng) for rng in [random.Random(10)] for i in range(3)]
    assert first == again
    assert first != other


# ---------------------------------------------------------------------------- main


def test_main_uploads_files_with_unique_keys(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    assert data_loader.main(["--bucket", "src", "--files", "5", "-n", "10", "--seed", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    keys = [call["key"] for call in recorder.calls]
    assert len(keys) == len(set(keys)) == 5
    assert out == [f"s3://src/{key}" for key in keys]
    matches = [KEY_RE.match(key) for key in keys]
    assert [m["index"] if m else None for m in matches] == ["0", "1", "2", "3", "4"]
    assert {call["content_type"] for call in recorder.calls} == {"application/vnd.apache.parquet"}
    for call in recorder.calls:
        table = pq.read_table(io.BytesIO(call["body"]))
        assert table.num_rows == 10
        assert table.column("my_col_1").null_count == 1


def test_main_seed_makes_keys_and_data_reproducible(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--bucket", "src", "--files", "3", "--seed", "123", "--format", "csv"]
    assert data_loader.main(argv) == 0
    first = capsys.readouterr().out
    first_calls = list(recorder.calls)
    recorder.calls.clear()
    assert data_loader.main(argv) == 0
    assert capsys.readouterr().out == first
    assert recorder.calls == first_calls
    assert {call["content_type"] for call in first_calls} == {"text/csv"}
    assert all(call["key"].endswith(".csv") for call in first_calls)


def test_main_without_seed_never_repeats_keys(recorder: Recorder) -> None:
    for _ in range(3):
        assert data_loader.main(["--bucket", "src", "--files", "2"]) == 0
    keys = [call["key"] for call in recorder.calls]
    assert len(set(keys)) == 6


def test_main_no_null(recorder: Recorder) -> None:
    assert data_loader.main(["--bucket", "src", "--no-null", "-n", "1000", "--seed", "4"]) == 0
    table = pq.read_table(io.BytesIO(recorder.calls[0]["body"]))
    assert table.num_rows == 1000
    assert table.column("my_col_1").null_count == 0


def test_main_defaults_and_source_bucket_env(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_BUCKET", "from-env")
    assert data_loader.main([]) == 0
    (call,) = recorder.calls
    assert call["bucket"] == "from-env"
    assert call["key"].startswith("customer_data_log/")
    table = pq.read_table(io.BytesIO(call["body"]))
    assert table.num_rows == 100
    assert table.column("my_col_1").null_count == 10
    captured = capsys.readouterr()
    assert captured.out == f"s3://from-env/{call['key']}\n"
    assert captured.err == ""


def test_main_bucket_flag_wins_over_env(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_BUCKET", "from-env")
    assert data_loader.main(["--bucket", "from-flag", "--table", "orders_2"]) == 0
    assert recorder.calls[0]["bucket"] == "from-flag"
    assert recorder.calls[0]["key"].startswith("orders_2/")


def test_main_verbose_goes_to_stderr(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    assert data_loader.main(["--bucket", "src", "-n", "1000", "--verbose", "--seed", "2", "--files", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"s3://src/{call['key']}" for call in recorder.calls]
    err = captured.err.splitlines()
    assert len(err) == 2
    for line, call in zip(err, recorder.calls, strict=True):
        assert "rows=1000" in line
        assert "nulls=100" in line
        assert f"bytes={len(call['body'])}" in line
        assert re.search(r"seconds=\d+\.\d{3}", line)


def test_main_missing_bucket(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    assert data_loader.main(["-n", "5"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--bucket" in captured.err
    assert "SOURCE_BUCKET" in captured.err
    assert 'eval "$(wap stack env)"' in captured.err
    assert recorder.calls == []


def test_main_blank_source_bucket_counts_as_missing(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_BUCKET", "  ")
    assert data_loader.main([]) == 2
    assert "SOURCE_BUCKET" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--table", "Customer"], "not a valid table name"),
        (["--table", "1st_table"], "not a valid table name"),
        (["--table", "my-table"], "not a valid table name"),
        (["--table", "a/b"], "not a valid table name"),
        (["--table", ""], "not a valid table name"),
        (["-n", "0"], "argument -n/--rows: must be >= 1"),
        (["--rows", "-3"], "argument -n/--rows: must be >= 1"),
        (["-n", "ten"], "argument -n/--rows: 'ten' is not an integer"),
        (["--files", "0"], "argument --files: must be >= 1"),
        (["--format", "json"], "argument --format: invalid choice"),
        (["--seed", "x"], "argument --seed: invalid int value"),
        (["--unknown"], "unrecognized arguments"),
    ],
)
def test_main_argument_validation(
    recorder: Recorder, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert data_loader.main(["--bucket", "src", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert recorder.calls == []


def test_main_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert data_loader.main(["--help"]) == 0
    assert "--no-null" in capsys.readouterr().out


# ---------------------------------------------------------------------------- S3 errors


def _client_error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "PutObject")


@pytest.mark.parametrize(
    ("exc", "needles"),
    [
        (_client_error("NoSuchBucket", "The specified bucket does not exist"), ["does not exist", "create it"]),
        (_client_error("InvalidAccessKeyId", "bad key"), ["InvalidAccessKeyId", "credentials"]),
        (_client_error("AccessDenied", "Access Denied"), ["AccessDenied", "credentials"]),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), ["cannot reach", "AWS_ENDPOINT_URL"]),
        (NoCredentialsError(), ["credentials", "AWS_ACCESS_KEY_ID"]),
        (_client_error("SlowDown", "Please reduce\nyour request rate"), ["SlowDown"]),
    ],
)
def test_describe_s3_error_is_one_line_naming_bucket(exc: Exception, needles: list[str]) -> None:
    text = data_loader.describe_s3_error(exc, "my-bucket")
    assert "\n" not in text
    assert "s3://my-bucket" in text
    for needle in needles:
        assert needle in text


class FailingClient:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def put_object(self, **kwargs: Any) -> Any:
        raise self.exc


def test_main_s3_error_exits_one_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = FailingClient(_client_error("NoSuchBucket", "The specified bucket does not exist"))
    monkeypatch.setattr(data_loader, "s3_client", lambda: failing)
    assert data_loader.main(["--bucket", "nope", "--files", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert "s3://nope" in captured.err
    assert "Traceback" not in captured.err


def test_main_without_credentials(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A real boto3 client with no credentials fails while signing, before any request is sent."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # never contacted
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert data_loader.main(["--bucket", "src"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "no usable AWS credentials" in captured.err
    assert "s3://src" in captured.err
