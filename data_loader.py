"""Synthetic producer: write small parquet/CSV files into s3://$SOURCE_BUCKET/<table>/ for the WAP pipeline.

Compatible with the reference loader's flags::

    python data_loader.py --no-null -n 1000 --verbose

Every file has the schema ``my_col_0: int32, my_col_1: string, my_col_2: double``. Without ``--no-null``
about 10% (and always at least one) of the ``my_col_1`` values are NULL, so the downstream not_null audit
on ``my_col_1`` fails and the branch is not merged.

stdout carries only the ``s3://bucket/key`` URI of each uploaded object, one per line, so scripts can
capture it; ``--verbose`` statistics and all errors go to stderr. Exit codes: 0 success, 1 S3 error,
2 usage error. The S3 client is a plain ``boto3.client("s3")``: AWS_ENDPOINT_URL, AWS_REGION and the
credentials come from the environment (locally: ``eval "$(wap stack env)"``).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import boto3
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)

DEFAULT_TABLE = "customer_data_log"
DEFAULT_ROWS = 100
NULL_SHARE = 0.10
FORMATS = ("parquet", "csv")
CONTENT_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv"}
SCHEMA = pa.schema(
    [
        pa.field("my_col_0", pa.int32()),
        pa.field("my_col_1", pa.string()),
        pa.field("my_col_2", pa.float64()),
    ]
)
# Same rule the pipeline applies to the first key segment (wap_ingest.core.naming).
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,127}")
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
_ENV_HINT = 'eval "$(wap stack env)"'


class S3Client(Protocol):
    """The one boto3 S3 call the loader makes."""

    def put_object(self, **kwargs: Any) -> Any: ...


class S3UploadError(Exception):
    """An upload failed; the message is one line naming the bucket and the likely fix."""


# --------------------------------------------------------------------------------------------------------
# Pure parts
# --------------------------------------------------------------------------------------------------------


def null_count(rows: int, nulls: bool) -> int:
    """How many my_col_1 values are NULL: none with --no-null, else ~10% and at least one."""
    if not nulls or rows < 1:
        return 0
    return min(rows, max(1, round(rows * NULL_SHARE)))


def make_rows(rows: int, nulls: bool, rng: random.Random) -> pa.Table:
    """A table of `rows` synthetic rows; with `nulls`, ~10% (at least one) of my_col_1 is NULL."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    null_positions = set(rng.sample(range(rows), null_count(rows, nulls)))
    col_0 = [rng.randint(0, 1_000_000) for _ in range(rows)]
    col_1: list[str | None] = [
        None if i in null_positions else f"{rng.choice(_WORDS)}_{rng.randrange(10_000):04d}"
        for i in range(rows)
    ]
    col_2 = [round(rng.uniform(-1000.0, 1000.0), 6) for _ in range(rows)]
    return pa.table(
        [pa.array(col_0, pa.int32()), pa.array(col_1, pa.string()), pa.array(col_2, pa.float64())],
        schema=SCHEMA,
    )


def encode(table: pa.Table, fmt: str) -> bytes:
    """Serialise `table` as parquet or CSV (header row; NULL is an empty, unquoted field)."""
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink)
    elif fmt == "csv":
        pa_csv.write_csv(table, sink, pa_csv.WriteOptions(include_header=True))
    else:
        raise ValueError(f"unsupported format {fmt!r}; use one of {', '.join(FORMATS)}")
    data: bytes = sink.getvalue().to_pybytes()
    return data


def object_key(table_name: str, index: int, fmt: str, now: datetime, rng: random.Random) -> str:
    """`<table>/<UTC timestamp>-<8 hex>-<index>.<fmt>`; the hex part comes from `rng`.

    A naive `now` is taken to be UTC.
    """
    utc = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return f"{table_name}/{utc:%Y-%m-%dT%H-%M-%SZ}-{rng.getrandbits(32):08x}-{index}.{fmt}"


def describe_s3_error(exc: BaseException, bucket: str) -> str:
    """One line naming the bucket and the likely fix for a boto3/botocore failure."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return (
            f"error: no usable AWS credentials to upload to s3://{bucket}. Fix: export AWS_ACCESS_KEY_ID and "
            f"AWS_SECRET_ACCESS_KEY (locally: {_ENV_HINT})."
        )
    if isinstance(exc, EndpointConnectionError):
        return (
            f"error: cannot reach the S3 endpoint {endpoint} to upload to s3://{bucket}. Fix: start "
            f"the local stack or point AWS_ENDPOINT_URL at a running S3 endpoint (locally: {_ENV_HINT})."
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")).replace("\n", " ")
        if code in ("NoSuchBucket", "404", "NotFound"):
            return (
                f"error: bucket s3://{bucket} does not exist at {endpoint}. Fix: create it, or pass the "
                f"right --bucket / export SOURCE_BUCKET (locally: {_ENV_HINT})."
            )
        if code in (
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "ExpiredToken",
            "InvalidToken",
            "403",
        ):
            return (
                f"error: S3 refused the upload to s3://{bucket} ({code}: {message or 'access denied'}). "
                f"Fix: check the AWS credentials and their write access (locally: {_ENV_HINT})."
            )
        return f"error: upload to s3://{bucket} failed ({code or 'unknown error'}: {message or exc})."
    text = str(exc).replace("\n", " ")
    return (
        f"error: upload to s3://{bucket} failed ({type(exc).__name__}: {text}). Fix: check AWS_ENDPOINT_URL "
        f"and the credentials (locally: {_ENV_HINT})."
    )


# --------------------------------------------------------------------------------------------------------
# Edges
# --------------------------------------------------------------------------------------------------------


def s3_client() -> S3Client:
    """A plain boto3 S3 client; endpoint, region and credentials come from the environment.

    A new Session each time: boto3's default session caches the credentials it first resolved."""
    try:
        client: S3Client = boto3.session.Session().client("s3")
    except (BotoCoreError, ValueError) as exc:  # e.g. a malformed AWS_ENDPOINT_URL
        raise S3UploadError(
            f"error: cannot create an S3 client: {exc}. Fix: check AWS_ENDPOINT_URL and "
            f"AWS_REGION (locally: {_ENV_HINT})."
        ) from exc
    return client


def upload(client: S3Client, bucket: str, key: str, body: bytes, content_type: str) -> str:
    """PUT one object; return its URI. Any boto3/botocore failure becomes an S3UploadError."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
    except (BotoCoreError, ClientError) as exc:
        raise S3UploadError(describe_s3_error(exc, bucket)) from exc
    return f"s3://{bucket}/{key}"


def utc_now() -> datetime:
    return datetime.now(UTC)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _table_name(text: str) -> str:
    if not _TABLE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid table name: use lowercase letters, digits and underscores, "
            f"not starting with a digit (pattern [a-z_][a-z0-9_]*, at most 128 characters)"
        )
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="data_loader.py",
        description="Upload synthetic parquet/CSV files to s3://<bucket>/<table>/ for the WAP pipeline. "
        "Prints each object's s3:// URI on stdout.",
    )
    parser.add_argument("-n", "--rows", type=_positive_int, default=DEFAULT_ROWS, help="rows per file (100)")
    parser.add_argument(
        "--no-null", action="store_true", help="no NULLs in my_col_1 (else ~10%%, at least one, are NULL)"
    )
    parser.add_argument("--verbose", action="store_true", help="per-file statistics on stderr")
    parser.add_argument(
        "--table", type=_table_name, default=DEFAULT_TABLE, help=f"table = key prefix ({DEFAULT_TABLE})"
    )
    parser.add_argument("--files", type=_positive_int, default=1, help="how many files (1)")
    parser.add_argument("--format", choices=FORMATS, default="parquet", help="file format (parquet)")
    parser.add_argument("--bucket", default=None, help="target bucket (default: $SOURCE_BUCKET)")
    parser.add_argument("--seed", type=int, default=None, help="seed: reproducible data and object keys")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage/help; return its code instead of raising
        return exc.code if isinstance(exc.code, int) else 2

    bucket = (args.bucket or os.environ.get("SOURCE_BUCKET", "")).strip()
    if not bucket:
        print(
            f"{parser.prog}: error: no bucket: pass --bucket <name> or export SOURCE_BUCKET "
            f"(locally: {_ENV_HINT}).",
            file=sys.stderr,
        )
        return 2

    rng = random.Random(args.seed)  # seed None -> seeded from os.urandom, so keys differ between runs
    fmt: str = args.format
    now = utc_now()
    try:
        client = s3_client()
    except S3UploadError as exc:
        print(exc, file=sys.stderr)
        return 1
    for index in range(args.files):
        started = time.perf_counter()
        table = make_rows(args.rows, not args.no_null, rng)
        body = encode(table, fmt)
        key = object_key(args.table, index, fmt, now, rng)
        try:
            uri = upload(client, bucket, key, body, CONTENT_TYPES[fmt])
        except S3UploadError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(uri, flush=True)
        if args.verbose:
            print(
                f"{uri}: rows={table.num_rows} nulls={table.column('my_col_1').null_count} "
                f"bytes={len(body)} seconds={time.perf_counter() - started:.3f}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
