"""The EMR Serverless job request for one large file, made from the Settings (deterministic: the same settings,
audits file, object version and attempt, the same request): the entry point and its arguments, the pinned jars, the
Python archive and package, the catalog settings without credentials, and the driver's environment, which names the
secret parameters and never holds a secret.

The job audits with the audits file shipped in its artefacts (`spark.files`), the function with its own: the request
carries the function's digest of it (`--audits-digest`), and the job compares it with the file it loaded before doing
anything (entrypoints/emr_job.py), so a large file is never audited against other rules than the function's.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from wap_ingest.adapters.aws import digest_of
from wap_ingest.adapters.engine import spark_conf_for
from wap_ingest.bootstrap.config import EmrSettings, Settings
from wap_ingest.bootstrap.engine_settings import spark_settings_for
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.models import SourceObject, TableRef

ENTRY_POINT = "emr_job.py"
PACKAGE = "wap_ingest.zip"
PYTHON_ARCHIVE = "wap-pyenv.tar.gz"
AUDITS = "audits.yml"
EXECUTION_TIMEOUT_MINUTES = 180
# Spark settings that describe the local process, not the cluster's (EMR sizes its own driver and disks).
_LOCAL_ONLY = ("spark.jars", "spark.driver.memory", "spark.local.dir", "spark.driver.extraJavaOptions")


def audits_digest(path: Path) -> str:
    """The sha256 of the audits file's bytes (`make emr-artifacts` copies it byte for byte)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"audits file {path}: cannot be read ({exc}). Fix: check WAP_AUDITS_FILE.") from exc


def job_environment(settings: Settings) -> dict[str, str]:
    values = {
        "LAKE_BUCKET": settings.lake_bucket,
        "SOURCE_BUCKET": settings.source_bucket or "",
        "WAP_SOURCE_BUCKETS": ",".join(sorted(settings.source_buckets)),
        "NESSIE_ENDPOINT": settings.nessie_endpoint,
        "WAP_NAMESPACE": settings.namespace,
        "WAP_WAREHOUSE": settings.warehouse,
        "WAP_MAIN_BRANCH": settings.main_branch,
        "WAP_HTTP_TIMEOUT": str(settings.http_timeout),
        "SLACK_CHANNEL": settings.slack_channel or "",
        "WAP_SLACK_TOKEN_PARAMETER": settings.slack_token_parameter or "",
        "WAP_SLACK_BASE_URL": settings.slack_base_url or "",
        "AWS_REGION": settings.aws_region,
        "AWS_ENDPOINT_URL": settings.aws_endpoint_url or "",
        "WAP_AUDITS_FILE": AUDITS,  # shipped with spark.files into the driver's working directory
        "WAP_STAGE": "s3",
        "WAP_EVENT_BUS": settings.event_bus or "",  # the job announces its outcome as the function does
    }
    auth = settings.nessie_auth
    if auth is not None:
        if auth.client_secret_parameter is None:
            raise ConfigError("a large file cannot go to EMR with WAP_NESSIE_CLIENT_SECRET set directly: the job "
                              "would need the secret in its request. Fix: use WAP_NESSIE_CLIENT_SECRET_PARAMETER.")
        values |= {"WAP_NESSIE_TOKEN_ENDPOINT": auth.token_endpoint, "WAP_NESSIE_CLIENT_ID": auth.client_id,
                   "WAP_NESSIE_CLIENT_SECRET_PARAMETER": auth.client_secret_parameter,
                   "WAP_NESSIE_SCOPE": auth.scope or ""}
    return {k: v for k, v in values.items() if v}


def job_spark_conf(settings: Settings, emr: EmrSettings) -> dict[str, str]:
    """The job's Spark settings: the pinned jars, the Python archive and package, the Iceberg/Nessie catalog
    (without credentials: the job adds them in-process), and the driver's and executors' environment."""
    catalog = spark_conf_for(spark_settings_for(replace(settings, nessie_auth=None), jars=False))
    conf = {k: v for k, v in catalog.items() if k not in _LOCAL_ONLY}
    jars = [f"{emr.artifacts}/jars/{jar.name}" for jar in settings.spark_jars()]
    conf |= {
        "spark.jars": ",".join(jars),
        "spark.archives": f"{emr.artifacts}/{PYTHON_ARCHIVE}#environment",
        "spark.submit.pyFiles": f"{emr.artifacts}/{PACKAGE}",
        "spark.files": f"{emr.artifacts}/{AUDITS}",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": "python3.11",
        "spark.emr-serverless.driverEnv.PYTHONPATH": "./environment",
        "spark.executorEnv.PYSPARK_PYTHON": "python3.11",
        "spark.executorEnv.PYTHONPATH": "./environment",
    }
    for name, value in job_environment(settings).items():
        conf[f"spark.emr-serverless.driverEnv.{name}"] = value
    return conf


def client_token_for(digest: str, attempt: int) -> str:
    """EMR deduplicates `start_job_run` by this token: one per object version and attempt (at most 64 characters),
    so a resubmission after a failed run starts a new run, and two deliveries of the same attempt start one."""
    return digest[:64] if attempt == 1 else f"{digest[:54]}-attempt{attempt}"


def job_request(settings: Settings, emr: EmrSettings, source: SourceObject, table: TableRef,
                attempt: int = 1) -> dict[str, Any]:
    """The `start_job_run` arguments for one object version and attempt (deterministic: the same version and
    attempt, the same request)."""
    arguments = ["--bucket", source.bucket, "--key", source.key, "--table", table.qualified]
    for flag, value in (("--size", source.size), ("--etag", source.etag), ("--version-id", source.version_id)):
        if value is not None:
            arguments += [flag, str(value).strip('"')]
    arguments += ["--audits-digest", audits_digest(settings.audits_file)]
    conf = job_spark_conf(settings, emr)
    digest = digest_of(source)
    return {
        "applicationId": emr.application_id,
        "clientToken": client_token_for(digest, attempt),
        "executionRoleArn": emr.execution_role_arn,
        "name": f"wap-{table.qualified}-{digest[:16]}" + (f"-attempt{attempt}" if attempt > 1 else ""),
        "jobDriver": {"sparkSubmit": {
            "entryPoint": f"{emr.artifacts}/{ENTRY_POINT}",
            "entryPointArguments": arguments,
            "sparkSubmitParameters": " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()),
        }},
        "configurationOverrides": {"monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": emr.logs}}},
        "executionTimeoutMinutes": EXECUTION_TIMEOUT_MINUTES,
        "tags": {"project": "wap-lake", "wap:table": table.qualified, "wap:object-digest": digest[:32],
                 "wap:attempt": str(attempt)},
    }


def job_request_for(settings: Settings, source: SourceObject, table: TableRef, attempt: int = 1) -> dict[str, Any]:
    if settings.emr is None:
        raise ConfigError("EMR Serverless is not configured. Fix: set WAP_EMR_APPLICATION_ID and "
                          "WAP_EMR_EXECUTION_ROLE_ARN.")
    return job_request(settings, settings.emr, source, table, attempt)


def maintenance_request_for(settings: Settings, table: TableRef, day: str) -> dict[str, Any]:
    """The `start_job_run` arguments of `wap maintain` for one table on one day (`YYYY-MM-DD`): the client token
    makes it at most one run per table and day, whoever asks (the schedule, an operator)."""
    if settings.emr is None:
        raise ConfigError("EMR Serverless is not configured. Fix: set WAP_EMR_APPLICATION_ID and "
                          "WAP_EMR_EXECUTION_ROLE_ARN.")
    emr = settings.emr
    conf = job_spark_conf(settings, emr)
    return {
        "applicationId": emr.application_id,
        "clientToken": f"maintain-{table.qualified}-{day}"[:64],
        "executionRoleArn": emr.execution_role_arn,
        "name": f"wap-maintain-{table.qualified}-{day}",
        "jobDriver": {"sparkSubmit": {
            "entryPoint": f"{emr.artifacts}/{ENTRY_POINT}",
            "entryPointArguments": ["--maintain", table.qualified, "--audits-digest",
                                    audits_digest(settings.audits_file)],
            "sparkSubmitParameters": " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()),
        }},
        "configurationOverrides": {"monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": emr.logs}}},
        "executionTimeoutMinutes": EXECUTION_TIMEOUT_MINUTES,
        "tags": {"project": "wap-lake", "wap:table": table.qualified, "wap:maintain": day},
    }
