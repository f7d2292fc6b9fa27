"""EmrServerlessJobs: the LargeFileJobs port on EMR Serverless (boto3 `emr-serverless`).

A large file becomes one job run whose entry point (wap_ingest/entrypoints/emr_job.py, uploaded by
`make emr-artifacts`) runs the same pipeline in the cluster. At most once per object version, twice over:
- a record in the lake bucket (`wap-emr/<table>/<digest>.json`), created with If-None-Match so only one
  delivery of the event submits, and updated with the job run id (what `wap branches`/`wap history` show);
- a client token derived from the object version, so a retried submission after a crash between the two
  steps is deduplicated by EMR itself.
The request carries no secret: the job reads the Slack token and the Nessie client secret from their
parameters (SSM / Secrets Manager) at start, as the function does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters.spark import spark_conf_for
from wap_ingest.config import EmrSettings, Settings
from wap_ingest.core.errors import ConfigError, InfrastructureError
from wap_ingest.core.models import JobRun, SourceObject, TableRef
from wap_ingest.core.ports import LargeFileJobs

log = logging.getLogger(__name__)

RECORD_PREFIX = "wap-emr"
ENTRY_POINT = "emr_job.py"
PACKAGE = "wap_ingest.zip"
PYTHON_ARCHIVE = "wap-pyenv.tar.gz"
AUDITS = "audits.yml"
EXECUTION_TIMEOUT_MINUTES = 180
# Spark settings that describe the local process, not the cluster's (EMR sizes its own driver and disks).
_LOCAL_ONLY = ("spark.jars", "spark.driver.memory", "spark.local.dir", "spark.driver.extraJavaOptions")
# The settings the job's Settings.from_env needs, passed as driver environment. Never a secret value: only the
# names of the parameters that hold them.
_JOB_VARIABLES = (
    "SOURCE_BUCKET", "NESSIE_ENDPOINT", "WAP_NAMESPACE", "WAP_WAREHOUSE", "WAP_MAIN_BRANCH", "WAP_HTTP_TIMEOUT",
    "SLACK_CHANNEL", "WAP_SLACK_TOKEN_PARAMETER", "WAP_SLACK_BASE_URL", "WAP_NESSIE_TOKEN_ENDPOINT",
    "WAP_NESSIE_CLIENT_ID", "WAP_NESSIE_CLIENT_SECRET_PARAMETER", "WAP_NESSIE_SCOPE", "AWS_ENDPOINT_URL",
)


def digest_of(source: SourceObject) -> str:
    return hashlib.sha256(source.identity.encode("utf-8")).hexdigest()


def record_key(table: TableRef, source: SourceObject) -> str:
    return f"{RECORD_PREFIX}/{table.qualified}/{digest_of(source)[:32]}.json"


def job_environment(settings: Settings) -> dict[str, str]:
    values = {
        "LAKE_BUCKET": settings.lake_bucket,
        "SOURCE_BUCKET": settings.source_bucket or "",
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
    catalog = spark_conf_for(replace(settings, nessie_auth=None))
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


def job_request(settings: Settings, emr: EmrSettings, source: SourceObject, table: TableRef) -> dict[str, Any]:
    """The `start_job_run` arguments for one object version (deterministic: the same version, the same request)."""
    arguments = ["--bucket", source.bucket, "--key", source.key, "--table", table.qualified]
    for flag, value in (("--size", source.size), ("--etag", source.etag), ("--version-id", source.version_id)):
        if value is not None:
            arguments += [flag, str(value).strip('"')]
    conf = job_spark_conf(settings, emr)
    digest = digest_of(source)
    return {
        "applicationId": emr.application_id,
        "clientToken": digest[:64],
        "executionRoleArn": emr.execution_role_arn,
        "name": f"wap-{table.qualified}-{digest[:16]}",
        "jobDriver": {"sparkSubmit": {
            "entryPoint": f"{emr.artifacts}/{ENTRY_POINT}",
            "entryPointArguments": arguments,
            "sparkSubmitParameters": " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()),
        }},
        "configurationOverrides": {"monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": emr.logs}}},
        "executionTimeoutMinutes": EXECUTION_TIMEOUT_MINUTES,
        "tags": {"project": "wap-lake", "wap:table": table.qualified, "wap:object-digest": digest[:32]},
    }


def parse_submit_parameters(parameters: str) -> dict[str, str]:
    """`--conf k=v ...` back to a dict (the local runner and the tests read the request this way)."""
    words, conf = shlex.split(parameters), {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag != "--conf":
            raise ValueError(f"unexpected spark-submit parameter {flag!r}")
        key, _, val = value.partition("=")
        conf[key] = val
    return conf


class EmrServerlessJobs(LargeFileJobs):
    def __init__(self, emr_client: Any, s3_client: Any, settings: Settings) -> None:
        if settings.emr is None:
            raise ConfigError("EMR Serverless is not configured. Fix: set WAP_EMR_APPLICATION_ID and "
                              "WAP_EMR_EXECUTION_ROLE_ARN.")
        self._emr, self._s3, self._settings, self._config = emr_client, s3_client, settings, settings.emr

    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        key = record_key(table, source)
        record = {"object": source.uri, "bucket": source.bucket, "key": source.key, "identity": source.identity,
                  "table": table.qualified, "application_id": self._config.application_id,
                  "claimed_at": _now()}
        if not self._claim(key, record):
            existing = self._read(key)
            if existing is not None and existing.get("job_run_id"):
                log.info("%s was already submitted as job run %s", source.uri, existing["job_run_id"])
                return self._run_from(existing, already=True)
            record = existing or record  # claimed earlier, submission not recorded: submit (the token dedupes)
        request = job_request(self._settings, self._config, source, table)
        try:
            started = self._emr.start_job_run(**request)
        except (ClientError, BotoCoreError) as exc:
            self._release(key, record)
            raise InfrastructureError(f"EMR Serverless refused the job for {source.uri} into {table} "
                                      f"(application {self._config.application_id}): {exc}") from exc
        record |= {"job_run_id": started["jobRunId"], "job_run_arn": started.get("arn"), "submitted_at": _now(),
                   "state": "SUBMITTED"}
        self._write(key, record)
        return self._run_from(record, already=False)

    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        prefix = f"{RECORD_PREFIX}/{table.qualified}/" if table else f"{RECORD_PREFIX}/"
        found = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._settings.lake_bucket,
                                                                           Prefix=prefix):
                for item in page.get("Contents", []):
                    record = self._read(item["Key"])
                    if record is not None and record.get("job_run_id"):
                        found.append(self._run_from(record, already=False, refresh=True))
        except (ClientError, BotoCoreError) as exc:
            raise InfrastructureError(f"listing the EMR job records in s3://{self._settings.lake_bucket}/{prefix}: "
                                      f"{exc}") from exc
        return sorted(found, key=lambda r: r.submitted_at, reverse=True)

    # --- the record ----------------------------------------------------------------------------------

    def _claim(self, key: str, record: dict[str, Any]) -> bool:
        try:
            self._s3.put_object(Bucket=self._settings.lake_bucket, Key=key, Body=json.dumps(record).encode(),
                                IfNoneMatch="*", ContentType="application/json")
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise InfrastructureError(f"recording the EMR submission at s3://{self._settings.lake_bucket}/{key}: "
                                      f"{exc}") from exc

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            body = self._s3.get_object(Bucket=self._settings.lake_bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise InfrastructureError(f"reading s3://{self._settings.lake_bucket}/{key}: {exc}") from exc
        value = json.loads(body)
        return value if isinstance(value, dict) else None

    def _write(self, key: str, record: dict[str, Any]) -> None:
        self._s3.put_object(Bucket=self._settings.lake_bucket, Key=key, Body=json.dumps(record).encode(),
                            ContentType="application/json")

    def _release(self, key: str, record: dict[str, Any]) -> None:
        """The submission failed: drop the claim so the retried event submits again."""
        if not record.get("job_run_id"):
            self._s3.delete_object(Bucket=self._settings.lake_bucket, Key=key)

    def _run_from(self, record: dict[str, Any], *, already: bool, refresh: bool = False) -> JobRun:
        state = str(record.get("final_state") or record.get("state") or "SUBMITTED")
        if refresh and not record.get("final_state"):
            try:
                run = self._emr.get_job_run(applicationId=record["application_id"], jobRunId=record["job_run_id"])
                state = str(run["jobRun"]["state"])
            except (ClientError, BotoCoreError) as exc:
                log.warning("cannot read the state of job run %s: %s", record["job_run_id"], exc)
        source = SourceObject(bucket=str(record["bucket"]), key=str(record["key"]))
        return JobRun(job_run_id=str(record["job_run_id"]), application_id=str(record["application_id"]),
                      source=source, table=str(record["table"]), state=state,
                      submitted_at=str(record.get("submitted_at") or record.get("claimed_at")),
                      already_submitted=already, outcome=record.get("outcome"), branch=record.get("branch"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

