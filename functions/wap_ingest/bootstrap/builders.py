"""Settings -> one adapter: each function builds one adapter from the settings (plain values and clients only go to
the adapters, never the Settings). `bootstrap.Service` calls each once per process and keeps what it built."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wap_ingest.adapters.aws import (
    EmrServerlessJobs,
    S3DecisionLog,
    S3ObjectStore,
    S3ReportStore,
    S3RequestResults,
    s3_client_for,
    secret_from_parameter,
)
from wap_ingest.adapters.catalog import (
    BearerAuth,
    BranchTables,
    ClientCredentials,
    IcebergRestReader,
    NessieBranches,
    TokenProvider,
    nessie_client,
)
from wap_ingest.adapters.slack import LogNotifier, SlackNotifier, slack_client_for
from wap_ingest.bootstrap.audits_file import load_suites
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import job_request_for
from wap_ingest.bootstrap.engine_settings import spark_settings_for
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.ports import Notifier

__all__ = ["boto3_client", "catalog_for", "decisions_for", "free_bytes_in", "jobs_for", "load_suites",
           "nessie_credentials_for", "nessie_tokens_for", "notifier_for", "reader_for", "reports_for", "results_for",
           "s3_for", "spark_settings_for"]


def boto3_client(service_name: str, settings: Settings) -> Any:
    import boto3
    from botocore.config import Config

    timeout = Config(connect_timeout=min(settings.http_timeout, 10), read_timeout=settings.http_timeout,
                     retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client(service_name, region_name=settings.aws_region, endpoint_url=settings.aws_endpoint_url,
                        config=timeout)


def s3_for(settings: Settings) -> Any:
    return s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)


def slack_token_from(settings: Settings) -> str | None:
    """The Slack token: SLACK_TOKEN (local use), else read from SSM Parameter Store (a name) or Secrets Manager (an
    ARN) as WAP_SLACK_TOKEN_PARAMETER names it; None when neither is set."""
    if settings.slack_token is not None or not settings.slack_token_parameter:
        return settings.slack_token
    return secret_from_parameter(settings.slack_token_parameter, variable="WAP_SLACK_TOKEN_PARAMETER",
                                 what="the Slack token", timeout=settings.http_timeout)


def notifier_for(settings: Settings) -> Notifier:
    token = slack_token_from(settings)
    if token is None or settings.slack_channel is None:
        return LogNotifier()
    client = slack_client_for(token, settings.slack_base_url, settings.http_timeout)
    return SlackNotifier(client, settings.slack_channel)


def _nessie_client(settings: Settings) -> tuple[ClientCredentials, TokenProvider] | None:
    auth = settings.nessie_auth
    if auth is None:
        return None
    return nessie_client(auth.token_endpoint, auth.client_id, auth.scope, auth.client_secret,
                         auth.client_secret_parameter, settings.http_timeout)


def nessie_credentials_for(settings: Settings) -> ClientCredentials | None:
    """None when Nessie needs no authentication (no WAP_NESSIE_* auth settings)."""
    found = _nessie_client(settings)
    return None if found is None else found[0]


def nessie_tokens_for(settings: Settings) -> TokenProvider | None:
    found = _nessie_client(settings)
    return None if found is None else found[1]


def catalog_for(settings: Settings, tokens: TokenProvider | None = None) -> NessieBranches:
    tokens = tokens or nessie_tokens_for(settings)
    auth = BearerAuth(tokens) if tokens is not None else None
    return NessieBranches(settings.nessie_endpoint, timeout=settings.http_timeout, auth=auth)


def branch_tables_for(settings: Settings, tokens: TokenProvider | None = None,
                      objects: S3ObjectStore | None = None) -> BranchTables:
    """Tables on a branch loaded and committed from Python (the register path's commit), as the catalog client
    authenticates, with the service's S3 (`objects`: its client deletes an s3:// URI and writes a commit's files
    in one request each)."""
    tokens = tokens or nessie_tokens_for(settings)
    return BranchTables(settings.nessie_endpoint, timeout=settings.http_timeout,
                        auth=BearerAuth(tokens) if tokens is not None else None,
                        s3_endpoint=settings.aws_endpoint_url, region=settings.aws_region,
                        remove=None if objects is None else objects.remove,
                        put=None if objects is None else objects.write)


def reports_for(settings: Settings, s3: Any | None = None) -> S3ReportStore:
    """Where rejected runs' audit reports are kept: s3://$LAKE_BUCKET/wap-reports/<branch>.json."""
    return S3ReportStore(s3 or s3_for(settings), settings.lake_bucket)


def decisions_for(settings: Settings, s3: Any | None = None) -> S3DecisionLog:
    """The decision log (discards) in the lake bucket."""
    return S3DecisionLog(s3 or s3_for(settings), settings.lake_bucket)


def results_for(settings: Settings, s3: Any | None = None) -> S3RequestResults:
    """Where the service answers publish requests: s3://$LAKE_BUCKET/wap-requests/<request id>.json."""
    return S3RequestResults(s3 or s3_for(settings), settings.lake_bucket)


def reader_for(settings: Settings, tokens: TokenProvider | None = None) -> IcebergRestReader:
    return IcebergRestReader(settings.nessie_endpoint, tokens or nessie_tokens_for(settings),
                             timeout=settings.http_timeout)


def jobs_for(settings: Settings, s3: Any | None = None, notifier: Notifier | None = None) -> EmrServerlessJobs | None:
    """The large-file jobs (EMR Serverless); None when EMR is not configured. `notifier` hears of failed runs."""
    if settings.emr is None:
        return None

    def request_for(source: SourceObject, table: TableRef, attempt: int) -> dict[str, Any]:
        return job_request_for(settings, source, table, attempt)

    return EmrServerlessJobs(boto3_client("emr-serverless", settings), s3 or s3_for(settings),
                             lake_bucket=settings.lake_bucket, application_id=settings.emr.application_id,
                             request_for=request_for, max_attempts=settings.emr.max_attempts, notifier=notifier)


def free_bytes_in(directory: Path) -> Callable[[], int]:
    def free() -> int:
        directory.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(directory).free

    return free
