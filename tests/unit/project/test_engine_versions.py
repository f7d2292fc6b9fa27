"""The function and the EMR job run one engine: the same Spark and the same Iceberg (issue 35, item 1).

The function's Spark is pyspark's (requirements.txt and both locks: the test environment and the Lambda image) with
the jars of docker/pom.xml. The job's Spark is the one its EMR Serverless release runs (the release label of
infra/emr-application.json, which the local stack registers too), and its Iceberg is the pom's again: the request's
`spark.jars` are the pinned jars the artefacts upload, never the Iceberg EMR bundles (emr-spark-8.1.0 bundles 1.11.0,
which is not on a job's classpath unless a job names its jar). A test below fails as soon as one of them moves alone.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from tests.paths import ROOT
from wap_ingest.adapters.aws.emr import parse_submit_parameters
from wap_ingest.adapters.engine import spark_conf_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import job_request
from wap_ingest.bootstrap.engine_settings import spark_settings_for
from wap_ingest.core.models import SourceObject, TableRef
from wap_stack import emr as local_emr

POM = ROOT / "docker" / "pom.xml"
MANIFEST = ROOT / "docker" / "jars.sha256"
# What each EMR release label runs, from AWS's EMR release guide ("application versions" of each release; checked
# 2026-11-28: emr-spark-8.1.0 is the long-term-support release of the 8.1 line, Spark 4.1.1-amzn-0, Scala 2.13.17,
# Iceberg 1.11.0-amzn-0 bundled, Python 3.11 and 3.13). Moving the label: add its row from the guide first.
EMR_RELEASES = {
    "emr-7.9.0": {"spark": "3.5.5", "scala": "2.12"},
    "emr-spark-8.1.0": {"spark": "4.1.1", "scala": "2.13"},
}


def _pom(name: str) -> str:
    found = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", POM.read_text())
    assert found, f"docker/pom.xml: no <{name}>"
    return found.group(1)


def _pinned(path: Path, package: str) -> str:
    found = re.search(rf"^{re.escape(package)}==([^\s\\;]+)", path.read_text(), re.MULTILINE)
    assert found, f"{path.name}: {package} is not pinned"
    return found.group(1)


def _release_label() -> str:
    return str(json.loads((ROOT / "infra" / "emr-application.json").read_text())["releaseLabel"])


def _spark_jars() -> list[str]:
    """The jar names of the manifest's spark/ group: what `make jars`, the image and the EMR artefacts copy."""
    return sorted(line.split("  spark/")[1] for line in MANIFEST.read_text().splitlines()
                  if "  spark/" in line and not line.startswith("#"))


def test_pyspark_is_one_version_in_the_pins_the_locks_and_the_pom() -> None:
    pyspark = _pinned(ROOT / "requirements.txt", "pyspark")

    assert _pinned(ROOT / "requirements.lock", "pyspark") == pyspark
    assert _pinned(ROOT / "requirements-runtime.lock", "pyspark") == pyspark  # the Lambda image
    assert _pom("spark.version") == pyspark  # spark-avro, which must match the running Spark
    major_minor = ".".join(pyspark.split(".")[:2])
    assert _pom("spark.binary") == f"{major_minor}_{_pom('scala.binary')}"  # Iceberg's runtime for this Spark


def test_the_installed_pyspark_is_the_pinned_one() -> None:
    try:
        installed = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        pytest.skip("pyspark is not installed here: `make setup` installs it")
    assert installed == _pinned(ROOT / "requirements.txt", "pyspark")


def test_the_emr_release_runs_the_functions_spark() -> None:
    label = _release_label()

    assert label == local_emr.RELEASE_LABEL  # the local stack registers the application AWS gets
    assert label in EMR_RELEASES, f"{label}: add what it runs to EMR_RELEASES, from AWS's EMR release guide"
    assert EMR_RELEASES[label]["spark"] == _pinned(ROOT / "requirements.txt", "pyspark")
    assert EMR_RELEASES[label]["scala"] == _pom("scala.binary")


def test_the_pinned_jars_are_the_poms_spark_and_iceberg() -> None:
    spark, iceberg, scala = _pom("spark.version"), _pom("iceberg.version"), _pom("scala.binary")

    assert _spark_jars() == sorted([f"iceberg-spark-runtime-{_pom('spark.binary')}-{iceberg}.jar",
                                    f"iceberg-aws-bundle-{iceberg}.jar", f"spark-avro_{scala}-{spark}.jar"])


def _job_conf(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(the function's Spark settings, the EMR job request's), made from one set of settings."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in _spark_jars():
        (jars / name).write_bytes(b"")
    audits = tmp_path / "audits.yml"
    audits.write_text("tables: {}\n")
    settings = Settings.from_env({
        "LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "https://nessie.example", "WAP_AUDITS_FILE": str(audits),
        "WAP_JARS_DIR": str(jars), "WAP_EMR_APPLICATION_ID": "00abc", "AWS_REGION": "eu-west-1",
        "WAP_EMR_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/wap-emr-job"})
    assert settings.emr is not None
    request = job_request(settings, settings.emr, SourceObject("source", "big.csv", size=1, etag='"e"'),
                          TableRef("wap", "orders"))
    assert "/usr/share/aws/iceberg" not in json.dumps(request)  # EMR's own Iceberg jar stays off the classpath
    function = spark_conf_for(spark_settings_for(settings, jars=True))
    return function, parse_submit_parameters(request["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"])


def test_the_job_brings_the_functions_jars_and_not_emrs_iceberg(tmp_path: Path) -> None:
    function, job = _job_conf(tmp_path)

    assert [jar.rsplit("/", 1)[1] for jar in job["spark.jars"].split(",")] == _spark_jars()
    assert [jar.rsplit("/", 1)[1] for jar in function["spark.jars"].split(",")] == _spark_jars()


def test_the_job_and_the_function_run_spark_sql_with_the_same_semantics(tmp_path: Path) -> None:
    """Spark 4's ANSI mode is off in both, on purpose (README, "Spark 4's ANSI mode"), and so is every other SQL
    setting the function makes: a large file is audited by the same rules as a small one."""
    function, job = _job_conf(tmp_path)

    assert function["spark.sql.ansi.enabled"] == job["spark.sql.ansi.enabled"] == "false"
    sql = {key: value for key, value in function.items() if key.startswith("spark.sql.") and "catalog." not in key}
    assert {key: job.get(key) for key in sql} == sql
