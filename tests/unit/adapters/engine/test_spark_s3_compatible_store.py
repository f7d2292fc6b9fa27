"""S3FileIO's settings for an S3-compatible endpoint (moto locally) against AWS S3 (adapters/engine/session.py).

The AWS SDK in Iceberg 1.11's aws-bundle (2.44) uploads as signed aws-chunked bodies with a trailing CRC32 by default
(`STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`), which moto 5.1 stores chunk headers and all: the metadata files then
read back as `12;chunk-signature=...`. tests/integration/core/pipeline/test_pipeline_stack.py fails without the
setting."""

from __future__ import annotations

from pathlib import Path

from wap_ingest.adapters.engine.session import SparkSettings, spark_conf_for

CATALOG = "spark.sql.catalog.nessie"


def _settings(tmp_path: Path, endpoint: str | None) -> SparkSettings:
    return SparkSettings(nessie_uri="http://127.0.0.1:19120/api/v2", main_branch="main", warehouse="s3://lake/w",
                         region="us-east-1", s3_endpoint=endpoint, http_timeout=5.0, driver_memory="1g",
                         work_dir=tmp_path)


def test_an_s3_compatible_endpoint_gets_unchunked_uploads(tmp_path: Path) -> None:
    conf = spark_conf_for(_settings(tmp_path, "http://127.0.0.1:5000"))

    assert conf[f"{CATALOG}.s3.endpoint"] == "http://127.0.0.1:5000"
    assert conf[f"{CATALOG}.s3.chunked-encoding-enabled"] == "false"


def test_aws_s3_keeps_the_sdk_default(tmp_path: Path) -> None:
    conf = spark_conf_for(_settings(tmp_path, None))

    assert not [key for key in conf if key.startswith(f"{CATALOG}.s3.")]
