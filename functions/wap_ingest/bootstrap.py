"""Wiring: Settings -> adapters -> the pipeline's ports. Built once per process and cached, so warm
Lambda invocations (and a long `wap ingest` run) reuse one SparkSession and one set of clients.

Nessie client authentication (optional): the OAuth2 client secret is read here, once, from SSM or Secrets
Manager (WAP_NESSIE_CLIENT_SECRET_PARAMETER) or the environment (WAP_NESSIE_CLIENT_SECRET, local use), and
handed to the clients in memory: one token provider for pynessie, the REST v2 calls and PyIceberg, and the
Spark conf for the Nessie client inside Iceberg (which gets its own tokens)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wap_ingest.adapters.decision_log import S3DecisionLog
from wap_ingest.adapters.emr import EmrServerlessJobs
from wap_ingest.adapters.lake_reader import IcebergRestReader
from wap_ingest.adapters.nessie import NessieBranches
from wap_ingest.adapters.oauth2 import BearerAuth, ClientCredentials, TokenProvider
from wap_ingest.adapters.s3 import S3ObjectStore, s3_client_for
from wap_ingest.adapters.s3_reports import S3ReportStore
from wap_ingest.adapters.secrets import secret_from_parameter
from wap_ingest.adapters.slack import LogNotifier, SlackNotifier, slack_client_for, token_from_parameter
from wap_ingest.adapters.spark import SparkIcebergWriter, spark_session_for
from wap_ingest.adapters.spark_batch import SparkBatchWriter
from wap_ingest.config import NessieAuthSettings, Settings
from wap_ingest.core.audits import AuditSuites, audit, suites_from
from wap_ingest.core.batch import Result
from wap_ingest.core.errors import AuditSuiteError, CatalogError, ConfigError
from wap_ingest.core.ingest import (
    UNKNOWN_DELIVERY,
    Delivery,
    ingest_and_notify,
    ingest_batch_and_notify,
    submit_large_file,
)
from wap_ingest.core.models import (
    AppendResult,
    AuditReport,
    BatchAppend,
    FileFormat,
    IngestOutcome,
    MeasurementPlan,
    Measurements,
    SourceObject,
    TableRef,
)
from wap_ingest.core.naming import digest_from_branch
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.ports import BatchTableWriter, LargeFileJobs, Notifier, TableWriter

log = logging.getLogger(__name__)


def load_suites(path: Path, default_namespace: str) -> AuditSuites:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise AuditSuiteError(f"audits file {path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise AuditSuiteError(f"audits file {path}: cannot be read ({exc}). Fix: check WAP_AUDITS_FILE.") from exc
    try:
        return suites_from(document, default_namespace=default_namespace)
    except AuditSuiteError as exc:
        raise AuditSuiteError(f"{path}: {exc}") from exc


class LazyWriter(TableWriter):
    """Starts Spark on first use: listing objects or refusing a bad key needs no JVM."""

    def __init__(self, factory: Callable[[], SparkIcebergWriter]) -> None:
        self._factory = factory
        self._writer: SparkIcebergWriter | None = None

    @property
    def writer(self) -> SparkIcebergWriter:
        if self._writer is None:
            started = time.monotonic()
            self._writer = self._factory()
            log.info("Spark session started in %.2fs (once per process)", time.monotonic() - started)
        return self._writer

    @property
    def started(self) -> bool:
        return self._writer is not None

    def append(
        self, source: SourceObject, fmt: FileFormat, table: TableRef, branch: str, properties: Mapping[str, str],
        *, allow_new_columns: bool = False,
    ) -> AppendResult:
        return self.writer.append(source, fmt, table, branch, properties, allow_new_columns=allow_new_columns)

    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        return self.writer.find_append(table, ref, identity)

    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        return self.writer.measure_appended(table, branch, appended, plan)


class LazyBatchWriter(BatchTableWriter):
    """The batch path on the same lazily started engine."""

    def __init__(self, writer: LazyWriter) -> None:
        self._lazy = writer

    def find_appends(self, table: TableRef, ref: str, identities: Sequence[str]) -> dict[str, AppendResult]:
        return SparkBatchWriter(self._lazy.writer).find_appends(table, ref, identities)

    def append_batch(
        self,
        files: Sequence[tuple[SourceObject, FileFormat]],
        table: TableRef,
        branch: str,
        plan: MeasurementPlan,
        accept: Callable[[SourceObject, Measurements], bool],
        properties: Callable[[Sequence[SourceObject]], Mapping[str, str]],
    ) -> BatchAppend:
        return SparkBatchWriter(self._lazy.writer).append_batch(files, table, branch, plan, accept, properties)


@dataclass(frozen=True)
class Service:
    """Everything one process needs to run the pipeline."""

    settings: Settings
    ports: Ports
    suites: AuditSuites
    config: PipelineConfig
    objects: S3ObjectStore
    notifier: Notifier
    batch_writer: BatchTableWriter | None = None
    jobs: LargeFileJobs | None = None  # None: EMR is not configured, large files run here too

    def routes_to_emr(self, source: SourceObject) -> bool:
        return self.jobs is not None and source.size is not None and source.size > self.settings.large_file_bytes

    def submit_large(self, source: SourceObject, delivery: Delivery = UNKNOWN_DELIVERY) -> IngestOutcome:
        if self.jobs is None:
            raise ConfigError("EMR Serverless is not configured (WAP_EMR_APPLICATION_ID).")
        return submit_large_file(source, jobs=self.jobs, config=self.config, notifier=self.notifier,
                                 delivery=delivery)

    def ingest_batch(
        self, items: Sequence[tuple[SourceObject, Delivery]], out_of_time: Callable[[], bool] = lambda: False
    ) -> list[Result]:
        if self.batch_writer is None:
            raise ConfigError("this service has no batch writer")
        return ingest_batch_and_notify(
            items, ports=self.ports, batch_writer=self.batch_writer, suites=self.suites, config=self.config,
            notifier=self.notifier, out_of_time=out_of_time,
        )

    def ingest(
        self, source: SourceObject, table: TableRef | None = None, delivery: Delivery = UNKNOWN_DELIVERY
    ) -> IngestOutcome:
        return ingest_and_notify(
            source, ports=self.ports, suites=self.suites, config=self.config, notifier=self.notifier,
            delivery=delivery, table=table,
        )


def notifier_for(settings: Settings) -> Notifier:
    token = settings.slack_token
    if token is None and settings.slack_token_parameter:
        token = token_from_parameter(settings.slack_token_parameter)
    if token is None or settings.slack_channel is None:
        return LogNotifier()
    client = slack_client_for(token, settings.slack_base_url, settings.http_timeout)
    return SlackNotifier(client, settings.slack_channel)


@functools.lru_cache(maxsize=4)
def _nessie_client(auth: NessieAuthSettings, timeout: float) -> tuple[ClientCredentials, TokenProvider]:
    """The client credentials (the secret read once per process) and the token provider shared by the clients."""
    secret = auth.client_secret
    if secret is None:
        if auth.client_secret_parameter is None:  # Settings.from_env refuses this; a Settings built by hand may not
            raise ConfigError("WAP_NESSIE_CLIENT_SECRET_PARAMETER is not set. Fix: name the SecureString/secret.")
        secret = secret_from_parameter(
            auth.client_secret_parameter, variable="WAP_NESSIE_CLIENT_SECRET_PARAMETER",
            what="the Nessie OAuth2 client secret",
        )
    credentials = ClientCredentials(auth.token_endpoint, auth.client_id, secret, auth.scope)
    log.info("Nessie client authentication: OAuth2 client %s, token endpoint %s", auth.client_id, auth.token_endpoint)
    return credentials, TokenProvider(credentials, timeout=timeout)


def nessie_credentials_for(settings: Settings) -> ClientCredentials | None:
    """None when Nessie needs no authentication (no WAP_NESSIE_* auth settings)."""
    if settings.nessie_auth is None:
        return None
    return _nessie_client(settings.nessie_auth, settings.http_timeout)[0]


def nessie_tokens_for(settings: Settings) -> TokenProvider | None:
    if settings.nessie_auth is None:
        return None
    return _nessie_client(settings.nessie_auth, settings.http_timeout)[1]


def catalog_for(settings: Settings) -> NessieBranches:
    """The catalog alone, for operator commands that need no Spark."""
    tokens = nessie_tokens_for(settings)
    auth = BearerAuth(tokens) if tokens is not None else None
    return NessieBranches(settings.nessie_endpoint, timeout=settings.http_timeout, auth=auth)


def reports_for(settings: Settings, client: object | None = None) -> S3ReportStore:
    """Where rejected runs' audit reports are kept: s3://$LAKE_BUCKET/wap-reports/<branch>.json."""
    s3 = client or s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    return S3ReportStore(s3, settings.lake_bucket)


def jobs_for(settings: Settings) -> EmrServerlessJobs | None:
    """The large-file jobs (EMR Serverless), for the operator commands; None when EMR is not configured."""
    if settings.emr is None:
        return None
    s3 = s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    return EmrServerlessJobs(boto3_client("emr-serverless", settings), s3, settings)


def reader_for(settings: Settings) -> IcebergRestReader:
    return IcebergRestReader(settings.nessie_endpoint, nessie_tokens_for(settings))


def build_service(settings: Settings, *, submitted: bool = False) -> Service:
    """Validate the audits first (cheap, and a bad suite must fail before anything starts).

    `submitted`: the process was started by spark-submit (the EMR job): its session comes from the submission
    (master, jars), and large files are not routed again."""
    suites = load_suites(settings.audits_file, settings.namespace)
    if not submitted:
        settings.spark_jars()  # fail early, with the fix, if the jars are missing
    credentials = nessie_credentials_for(settings)  # reads the client secret now: a missing one fails start-up
    s3 = s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    objects = S3ObjectStore(s3)
    downloads = settings.work_dir / "downloads"
    stage: Callable[[SourceObject], Path | str]
    cleanup: Callable[[Path | str], None] | None = None
    if settings.stage == "s3":  # the cluster's executors read S3 themselves: an exact copy in the lake bucket
        stage, cleanup = (lambda src: objects.copy_to(src, settings.lake_bucket)), objects.remove
    else:
        stage = lambda src: objects.download(src, downloads)  # noqa: E731
    writer = LazyWriter(
        lambda: SparkIcebergWriter(spark_session_for(settings, credentials, submitted=submitted), stage,
                                   cleanup=cleanup)
    )
    jobs = None
    if settings.emr is not None and not submitted:
        emr = boto3_client("emr-serverless", settings)
        jobs = EmrServerlessJobs(emr, s3, settings)
    catalog = catalog_for(settings)
    return Service(
        settings=settings,
        ports=Ports(catalog=catalog, writer=writer, objects=objects, reports=reports_for(settings, s3)),
        suites=suites,
        config=PipelineConfig(default_namespace=settings.namespace, main_branch=settings.main_branch),
        objects=objects,
        notifier=notifier_for(settings),
        batch_writer=LazyBatchWriter(writer),
        jobs=jobs,
    )


def boto3_client(service_name: str, settings: Settings) -> Any:
    import boto3
    from botocore.config import Config

    timeout = Config(connect_timeout=min(settings.http_timeout, 10), read_timeout=settings.http_timeout,
                     retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client(service_name, region_name=settings.aws_region, endpoint_url=settings.aws_endpoint_url,
                        config=timeout)


_lock = threading.Lock()
_cache: dict[str, Service] = {}


def service() -> Service:
    """The process-wide Service, built on first use from the environment."""
    with _lock:
        if "service" not in _cache:
            started = time.monotonic()
            _cache["service"] = build_service(Settings.from_env())
            log.info("service built (once per process; warm invocations reuse it) in %.2fs", time.monotonic() - started)
        return _cache["service"]


def decisions_for(settings: Settings) -> S3DecisionLog:
    """The decision log (discards) in the lake bucket."""
    client = s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    return S3DecisionLog(client, settings.lake_bucket)


def source_reader_for(settings: Settings) -> Callable[[TableRef, str], Mapping[str, str]]:
    """(table, WAP branch) -> the source properties of the branch's WAP append, read with PyIceberg (no JVM)."""
    reader = reader_for(settings)

    def source_of(table: TableRef, branch: str) -> Mapping[str, str]:
        digest = digest_from_branch(branch)
        return {} if digest is None else reader.wap_source(table, branch, digest)

    return source_of


def reauditor_for(settings: Settings) -> Callable[[TableRef, str, str], AuditReport]:
    """(table, branch, source identity) -> the table's audit suite, read from the audits file now, run on the
    rows of the branch's WAP append: found by its identity and measured by the engine (this starts Spark)."""

    def reaudit(table: TableRef, branch: str, identity: str) -> AuditReport:
        suite = load_suites(settings.audits_file, settings.namespace).suite_for(table)
        writer = service().ports.writer
        appended = writer.find_append(table, branch, identity)
        if appended is None:
            raise CatalogError(
                f"no snapshot of {table} on {branch!r} carries the source identity {identity!r}, so its new rows "
                f"cannot be re-audited. Fix: inspect it (wap show {branch}); publish with --no-reaudit --reason "
                f"'...' or discard it."
            )
        return audit(suite, table, writer.measure_appended(table, branch, appended, suite.plan()))

    return reaudit
