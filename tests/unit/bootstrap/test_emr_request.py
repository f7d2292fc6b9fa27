"""The EMR Serverless request and settings, without a server: deterministic, complete, and free of secrets."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from wap_ingest.adapters.aws.emr import parse_submit_parameters, record_key
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import job_request
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.models import SourceObject, TableRef

ROLE = "arn:aws:iam::123456789012:role/wap-emr-job"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("iceberg-spark-runtime-4.1_2.13-1.12.0.jar", "iceberg-aws-bundle-1.12.0.jar",
                 "spark-avro_2.13-4.1.1.jar"):
        (jars / name).write_bytes(b"")
    audits = tmp_path / "audits.yml"
    audits.write_text("tables: {}\n")
    return {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "https://nessie.example", "WAP_AUDITS_FILE": str(audits),
            "WAP_JARS_DIR": str(jars), "WAP_EMR_APPLICATION_ID": "00abc", "WAP_EMR_EXECUTION_ROLE_ARN": ROLE,
            "SLACK_TOKEN": "xoxb-not-for-emr", "SLACK_CHANNEL": "#alerts",
            "WAP_SLACK_TOKEN_PARAMETER": "", "AWS_REGION": "eu-west-1"}


SOURCE = SourceObject("source", "orders/big.csv", size=5 * 1024**3, etag='"abc"')
TABLE = TableRef("wap", "orders")


def test_the_request_carries_the_job_and_is_deterministic(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    assert settings.emr is not None
    request = job_request(settings, settings.emr, SOURCE, TABLE)
    assert request == job_request(settings, settings.emr, SOURCE, TABLE)
    assert request["applicationId"] == "00abc" and request["executionRoleArn"] == ROLE
    assert len(request["clientToken"]) <= 64
    driver = request["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == "s3://lake/emr/artifacts/emr_job.py"
    suite = hashlib.sha256(b"tables: {}\n").hexdigest()  # the function's audits file: the job must load the same
    assert driver["entryPointArguments"] == ["--bucket", "source", "--key", "orders/big.csv", "--table", "wap.orders",
                                             "--size", str(5 * 1024**3), "--etag", "abc", "--audits-digest", suite]
    conf = parse_submit_parameters(driver["sparkSubmitParameters"])
    assert conf["spark.jars"].split(",") == [
        "s3://lake/emr/artifacts/jars/iceberg-aws-bundle-1.12.0.jar",
        "s3://lake/emr/artifacts/jars/iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
        "s3://lake/emr/artifacts/jars/spark-avro_2.13-4.1.1.jar"]
    assert conf["spark.sql.catalog.nessie.uri"] == "https://nessie.example/api/v2"
    assert conf["spark.emr-serverless.driverEnv.WAP_STAGE"] == "s3"
    assert "spark.driver.memory" not in conf and "spark.local.dir" not in conf
    assert request["configurationOverrides"]["monitoringConfiguration"]["s3MonitoringConfiguration"] == {
        "logUri": "s3://lake/emr/logs"}
    other = SourceObject("source", "orders/big.csv", size=5 * 1024**3, etag='"def"')
    assert job_request(settings, settings.emr, other, TABLE)["clientToken"] != request["clientToken"]
    assert record_key(TABLE, SOURCE) != record_key(TABLE, other)


def test_no_secret_value_reaches_the_request(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    assert settings.emr is not None
    text = str(job_request(settings, settings.emr, SOURCE, TABLE))
    assert "xoxb-not-for-emr" not in text


def test_direct_nessie_secret_cannot_go_to_emr(env: dict[str, str]) -> None:
    env |= {"WAP_NESSIE_TOKEN_ENDPOINT": "https://idp.example/token", "WAP_NESSIE_CLIENT_ID": "wap",
            "WAP_NESSIE_CLIENT_SECRET": "s3cr3t"}
    settings = Settings.from_env(env)
    assert settings.emr is not None
    with pytest.raises(ConfigError, match="WAP_NESSIE_CLIENT_SECRET_PARAMETER"):
        job_request(settings, settings.emr, SOURCE, TABLE)


@pytest.mark.parametrize(("changes", "message"), [
    ({"WAP_EMR_EXECUTION_ROLE_ARN": ""}, "WAP_EMR_EXECUTION_ROLE_ARN is not set"),
    ({"WAP_EMR_EXECUTION_ROLE_ARN": "wap-emr-job"}, "is not an IAM role ARN"),
    ({"WAP_EMR_ARTIFACTS": "/tmp/artifacts"}, "must be an s3:// location"),
    ({"WAP_LARGE_FILE_BYTES": "big"}, "WAP_LARGE_FILE_BYTES='big' must be a positive number"),
    ({"WAP_STAGE": "ftp"}, "WAP_STAGE='ftp'"),
    ({"WAP_TIME_RESERVE_SECONDS": "0"}, "WAP_TIME_RESERVE_SECONDS"),
    ({"WAP_EMR_MAX_ATTEMPTS": "0"}, "WAP_EMR_MAX_ATTEMPTS='0' must be a whole number from 1 to 9"),
    ({"WAP_EMR_MAX_ATTEMPTS": "three"}, "WAP_EMR_MAX_ATTEMPTS='three'"),
])
def test_invalid_scale_out_settings_name_the_variable(env: dict[str, str], changes: dict[str, str],
                                                       message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env | changes)


def test_defaults(env: dict[str, str]) -> None:
    settings = Settings.from_env({k: v for k, v in env.items() if not k.startswith("WAP_EMR")})
    assert settings.emr is None and settings.large_file_bytes == 1024**3 and settings.stage == "download"
    assert settings.time_reserve_seconds == 90


def test_each_attempt_has_its_own_client_token_and_name(env: dict[str, str]) -> None:
    settings = Settings.from_env(env | {"WAP_EMR_MAX_ATTEMPTS": "5"})
    assert settings.emr is not None and settings.emr.max_attempts == 5
    first, second = (job_request(settings, settings.emr, SOURCE, TABLE, attempt) for attempt in (1, 2))
    assert first == job_request(settings, settings.emr, SOURCE, TABLE)  # attempt 1: the request as before
    assert second == job_request(settings, settings.emr, SOURCE, TABLE, 2)  # deterministic per attempt
    assert first["clientToken"] != second["clientToken"] and len(second["clientToken"]) <= 64
    assert second["clientToken"].endswith("-attempt2") and second["name"].endswith("-attempt2")
    assert second["tags"]["wap:attempt"] == "2"
    assert {k: v for k, v in second.items() if k not in ("clientToken", "name", "tags")} == {
        k: v for k, v in first.items() if k not in ("clientToken", "name", "tags")}
    default = Settings.from_env(env).emr
    assert default is not None and default.max_attempts == 3
