"""The composition root: Settings -> adapters -> the pipeline's ports. It only wires. Built once per process and
cached, so warm Lambda invocations (and a long `wap ingest` run) reuse one engine and one set of clients.

Adapters get plain values and clients from here, never the Settings."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wap_ingest.adapters.audits_file import load_suites
from wap_ingest.adapters.decision_log import S3DecisionLog
from wap_ingest.adapters.emr import EmrServerlessJobs
from wap_ingest.adapters.emr_maintenance import EmrMaintenanceJobs
from wap_ingest.adapters.eventbridge import EventBridgeSink
from wap_ingest.adapters.lake_reader import IcebergRestReader
from wap_ingest.adapters.metrics import record_maintenance
from wap_ingest.adapters.nessie import NessieBranches
from wap_ingest.adapters.nessie_credentials import nessie_client
from wap_ingest.adapters.oauth2 import BearerAuth, ClientCredentials, TokenProvider
from wap_ingest.adapters.publish_requests import CatalogRequesters, S3RequestResults
from wap_ingest.adapters.s3 import S3ObjectStore, s3_client_for
from wap_ingest.adapters.s3_reports import S3ReportStore
from wap_ingest.adapters.slack import LogNotifier, SlackNotifier, slack_client_for, token_from_parameter
from wap_ingest.adapters.spark_maintenance import SparkTableMaintainer
from wap_ingest.adapters.spark_session import SparkEngine, SparkSettings, spark_conf_for, spark_session_for
from wap_ingest.adapters.spark_sql_guard import check_custom_sql
from wap_ingest.adapters.spark_writer import SparkIcebergWriter
from wap_ingest.adapters.sqs import SqsRetries
from wap_ingest.catalog_authz import OPERATOR, SERVICE, scope_for
from wap_ingest.config import Settings
from wap_ingest.core.audits import AuditSuites
from wap_ingest.core.dry_run import audit_branch
from wap_ingest.core.errors import WapError
from wap_ingest.core.ingest import UNKNOWN_DELIVERY, Delivery, Item, LargeFiles, ingest
from wap_ingest.core.ledger import LEDGER_NAMESPACE
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import AuditReport, IngestOutcome, SourceObject, TableRef
from wap_ingest.core.naming import digest_from_branch
from wap_ingest.core.pipeline import MaintenancePorts, PipelineConfig, Ports, Result, maintain_table
from wap_ingest.core.ports import EventSink, Notifier
from wap_ingest.core.publish_requests import PublishRequest, serve
from wap_ingest.core.review import Decision, publish_branch
from wap_ingest.emr_request import job_request_for, maintenance_request_for

log = logging.getLogger(__name__)

__all__ = ["Service", "build_service", "catalog_for", "decisions_for", "jobs_for", "load_suites", "notifier_for",
           "reader_for", "reauditor_for", "reports_for", "results_for", "service", "source_reader_for"]


@dataclass(frozen=True)
class Service:
    """Everything one process needs to run the pipeline."""

    settings: Settings
    ports: Ports
    suites: AuditSuites
    config: PipelineConfig
    objects: S3ObjectStore
    notifier: Notifier
    large_files: LargeFiles | None = None  # None: EMR is not configured (or this is the EMR job): all runs here
    engine: SparkEngine | None = None  # the process's Spark, started on first use
    retries: SqsRetries | None = None  # delays a failed SQS message's next attempt (the function's own queue)
    events: EventSink | None = None  # downstream events (WAP_EVENT_BUS); None: none are sent

    def ingest_all(self, items: Sequence[Item], out_of_time: Callable[[], bool] = lambda: False) -> list[Result]:
        """The entry points' one call: route, run, alert; one result per item (an outcome, or the error that
        fails its message)."""
        return ingest(items, ports=self.ports, suites=self.suites, config=self.config, notifier=self.notifier,
                      large_files=self.large_files, out_of_time=out_of_time, events=self.events)

    def ingest(
        self, source: SourceObject, table: TableRef | None = None, delivery: Delivery = UNKNOWN_DELIVERY
    ) -> IngestOutcome:
        """One object, for the CLI, the EMR job and tests: its outcome, or its failure raised."""
        (result,) = self.ingest_all([Item(source, delivery, table)])
        if isinstance(result, Exception):
            raise result
        return result

    def maintain(self, table: TableRef | None, *, dry_run: bool = False, here: bool = False
                 ) -> list[MaintenanceReport | WapError]:
        """`wap maintain`, its schedule and the EMR job (`here`: never sent to EMR again): one table, or every
        table on main (None). Each table's report, or the error that failed it (the others still run); each is
        logged and counted in the metrics."""
        main, catalog = self.settings.main_branch, self.ports.catalog
        tables = [table] if table else [t for t in catalog.list_tables(main) if t.namespace != LEDGER_NAMESPACE]
        if self.engine is None:
            raise WapError("maintenance needs the Spark engine; this service has none")
        jobs = None if here or self.settings.emr is None else EmrMaintenanceJobs(
            boto3_client("emr-serverless", self.settings),
            lambda t, day: maintenance_request_for(self.settings, t, day))
        ports = MaintenancePorts(catalog, SparkTableMaintainer(self.engine), jobs)
        results: list[MaintenanceReport | WapError] = []
        for each in tables:
            try:
                report = maintain_table(each, ports=ports, suite=self.suites.suite_for(each), config=self.config,
                                        dry_run=dry_run, here=here)
            except WapError as exc:
                log.error("maintaining %s failed: %s", each, exc, extra={"table": each.qualified})
                results.append(exc)
                continue
            log.info("maintenance of %s: %s", each, report.message, extra={"maintenance": report.to_dict()})
            record_maintenance(report)
            results.append(report)
        return results

    def answer(self, request: PublishRequest) -> dict[str, Any]:
        """An operator's publish request (wap_ingest.core.publish_requests), served with the service's own catalog
        role: who asks checked by the catalog, the branch re-audited here, merged; the answer is written to the
        lake bucket for the waiting `wap publish`. An infrastructure failure raises (the message is retried)."""
        settings = self.settings
        requesters = CatalogRequesters(settings.nessie_endpoint, authenticated=settings.nessie_auth is not None,
                                       allowed_roles=(scope_for(OPERATOR), scope_for(SERVICE)),
                                       timeout=settings.http_timeout)

        def publish(req: PublishRequest, actor: str) -> Decision:
            return publish_branch(
                self.ports.catalog, req.branch, reason=req.reason, actor=actor, source_of=source_reader_for(settings),
                reaudit=reauditor_for(settings) if req.reaudit else None, decisions=decisions_for(settings),
                main=settings.main_branch)

        answer = serve(request, identify=requesters.identify, publish=publish)
        results_for(settings).put(request.request_id, answer)
        return answer


def spark_settings_for(settings: Settings, *, jars: bool = True) -> SparkSettings:
    return SparkSettings(
        nessie_uri=settings.nessie_api_v2, main_branch=settings.main_branch, warehouse=settings.warehouse,
        region=settings.aws_region, s3_endpoint=settings.aws_endpoint_url, http_timeout=settings.http_timeout,
        driver_memory=settings.spark_driver_memory, work_dir=settings.work_dir,
        jars=tuple(settings.spark_jars()) if jars else (),
    )


def notifier_for(settings: Settings) -> Notifier:
    token = settings.slack_token
    if token is None and settings.slack_token_parameter:
        token = token_from_parameter(settings.slack_token_parameter, timeout=settings.http_timeout)
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


def catalog_for(settings: Settings) -> NessieBranches:
    """The catalog alone, for operator commands that need no Spark."""
    tokens = nessie_tokens_for(settings)
    auth = BearerAuth(tokens) if tokens is not None else None
    return NessieBranches(settings.nessie_endpoint, timeout=settings.http_timeout, auth=auth)


def reports_for(settings: Settings, client: object | None = None) -> S3ReportStore:
    """Where rejected runs' audit reports are kept: s3://$LAKE_BUCKET/wap-reports/<branch>.json."""
    s3 = client or s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    return S3ReportStore(s3, settings.lake_bucket)


def jobs_for(settings: Settings, s3: Any | None = None, notifier: Notifier | None = None) -> EmrServerlessJobs | None:
    """The large-file jobs (EMR Serverless); None when EMR is not configured. `notifier` hears of failed runs."""
    if settings.emr is None:
        return None
    s3 = s3 or s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)

    def request_for(source: SourceObject, table: TableRef, attempt: int) -> dict[str, Any]:
        return job_request_for(settings, source, table, attempt)

    return EmrServerlessJobs(boto3_client("emr-serverless", settings), s3, lake_bucket=settings.lake_bucket,
                             application_id=settings.emr.application_id, request_for=request_for,
                             max_attempts=settings.emr.max_attempts, notifier=notifier)


def reader_for(settings: Settings) -> IcebergRestReader:
    return IcebergRestReader(settings.nessie_endpoint, nessie_tokens_for(settings), timeout=settings.http_timeout)


def build_service(settings: Settings, *, submitted: bool = False) -> Service:
    """Validate the audits first (cheap, and a bad suite must fail before anything starts).

    `submitted`: the process was started by spark-submit (the EMR job): its session comes from the submission
    (master, jars), and large files are not routed again."""
    suites = load_suites(settings.audits_file, settings.namespace)
    spark = spark_settings_for(settings, jars=not submitted)  # fails early, with the fix, if the jars are missing
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
    conf = spark_conf_for(spark, credentials, local_jars=not submitted)
    engine = SparkEngine(lambda: spark_session_for(conf, submitted=submitted, work_dir=settings.work_dir),
                         on_start=lambda session: check_custom_sql(session, suites))
    writer = SparkIcebergWriter(engine, stage, cleanup=cleanup)
    notifier = notifier_for(settings)
    jobs = None if submitted else jobs_for(settings, s3, notifier)
    config = PipelineConfig(
        default_namespace=settings.namespace, main_branch=settings.main_branch,
        source_buckets=settings.source_buckets, refused_buckets=frozenset({settings.lake_bucket}),
        staging_budget_bytes=settings.staging_budget_bytes, free_bytes=_free_bytes(downloads),
        abandoned_after_seconds=settings.abandoned_branch_seconds,
    )
    return Service(
        settings=settings,
        ports=Ports(catalog=catalog_for(settings), writer=writer, objects=objects, reports=reports_for(settings, s3)),
        suites=suites, config=config, objects=objects, notifier=notifier, engine=engine,
        large_files=None if jobs is None else LargeFiles(jobs, settings.large_file_bytes),
        retries=None if submitted else SqsRetries(boto3_client("sqs", settings)),
        events=EventBridgeSink(boto3_client("events", settings), settings.event_bus) if settings.event_bus else None,
    )


def _free_bytes(directory: Path) -> Callable[[], int]:
    def free() -> int:
        directory.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(directory).free

    return free


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


def results_for(settings: Settings) -> S3RequestResults:
    """Where the service answers publish requests: s3://$LAKE_BUCKET/wap-requests/<request id>.json."""
    client = s3_client_for(settings.aws_region, settings.aws_endpoint_url, settings.http_timeout)
    return S3RequestResults(client, settings.lake_bucket)


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
    """(table, branch, source identity) -> the table's suite, read from the audits file now, run on the rows of the
    branch's WAP append by the pipeline's audit step (this starts Spark)."""

    def reaudit(table: TableRef, branch: str, identity: str) -> AuditReport:
        suites = load_suites(settings.audits_file, settings.namespace)
        return audit_branch(table, branch, identity, writer=service().ports.writer, suites=suites)

    return reaudit
