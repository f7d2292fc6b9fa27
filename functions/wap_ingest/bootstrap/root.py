"""The composition root of one process: every adapter built once, on first use, and kept (warm Lambda invocations,
a long `wap ingest`, an operator's command reuse what they built); and the use cases the entry points call. It only
wires: the decisions are the core's.

An operator's command builds only what it touches (a catalog client, the decision log...), never the engine: the
pipeline's entry points call `check()` first, which validates the audits file, the jars and the catalog client's
secret, so that a bad setting fails at start-up with its fix."""

from __future__ import annotations

import getpass
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from wap_ingest.adapters.aws import (
    EmrMaintenanceJobs,
    EventBridgeSink,
    S3ActionRecords,
    S3ObjectStore,
    S3ReportStore,
    S3RequestResults,
    SqsRetries,
    StsRequesters,
    queue_name_of,
    record_maintenance,
)
from wap_ingest.adapters.catalog import (
    ClientCredentials,
    IcebergRestReader,
    LakeAuditResults,
    NessieBranches,
    TokenProvider,
)
from wap_ingest.adapters.engine import (
    SparkEngine,
    SparkIcebergWriter,
    SparkSettings,
    SparkTableMaintainer,
    check_custom_sql,
    spark_conf_for,
    spark_session_for,
)
from wap_ingest.adapters.formats import start_worker
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import maintenance_request_for
from wap_ingest.core.audits import AuditSuites
from wap_ingest.core.branches import digest_from_branch
from wap_ingest.core.dry_run import DryRun, audit_branch, audit_without_publishing
from wap_ingest.core.errors import DeferredError, WapError
from wap_ingest.core.ingest import UNKNOWN_DELIVERY, Delivery, Item, LargeFiles, ingest
from wap_ingest.core.interactions import Answer, Asked, UseCases, answer, decided_by
from wap_ingest.core.job_sweep import SweepReport
from wap_ingest.core.ledger import LEDGER_NAMESPACE
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import AuditReport, IngestOutcome, JobRun, SourceObject, TableRef
from wap_ingest.core.pipeline import MaintenancePorts, PipelineConfig, Ports, Result, Transactions, maintain_table
from wap_ingest.core.ports import DecisionLog, EventSink, Notifier
from wap_ingest.core.publish_requests import PublishRequest, answer_request
from wap_ingest.core.review import (
    Decision,
    HistoryEntry,
    OpenBranch,
    Pruned,
    discard_branch,
    history_for,
    open_branches,
    prune_branches,
    publish_branch,
)

from . import builders
from .slack import SlackActions
from .sweeping import sweep_for

log = logging.getLogger(__name__)


class Service:
    """Everything one process needs. Keyword arguments replace what would be built (tests hand in fakes)."""

    def __init__(self, settings: Settings, *, submitted: bool = False, ports: Ports | None = None,
                 suites: AuditSuites | None = None, config: PipelineConfig | None = None,
                 objects: S3ObjectStore | None = None, notifier: Notifier | None = None,
                 large_files: LargeFiles | None = None, engine: SparkEngine | None = None,
                 retries: SqsRetries | None = None, events: EventSink | None = None,
                 decisions: DecisionLog | None = None) -> None:
        """`submitted`: the process was started by spark-submit (the EMR job): its session comes from the
        submission (master, jars), large files are not routed again and no SQS message is retried from here."""
        self.settings = settings
        self.submitted = submitted
        given = {"ports": ports, "suites": suites, "config": config, "objects": objects, "notifier": notifier,
                 "large_files": large_files, "engine": engine, "retries": retries, "events": events,
                 "decisions": decisions}
        self.__dict__.update({name: value for name, value in given.items() if value is not None})
        self._checked = False

    def replaced(self, **changes: Any) -> Service:
        """A copy that shares every adapter built so far, with `changes` in their place (tests and benchmarks
        swap a suite, the notifier or the configuration and keep the engine)."""
        copy = Service.__new__(Service)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    def check(self) -> Service:
        """Validate what the pipeline needs before it starts: the audits (a bad suite fails first), the jars (with
        the fix when they are missing), the catalog client's secret (read now: a missing one fails start-up)."""
        if not self._checked:
            _ = self.suites, self.spark, self.credentials
            self._checked = True
        return self

    # --- adapters, each built once ------------------------------------------------------------------

    @cached_property
    def s3(self) -> Any:
        return builders.s3_for(self.settings)

    @cached_property
    def objects(self) -> S3ObjectStore:
        return S3ObjectStore(self.s3)

    @cached_property
    def credentials(self) -> ClientCredentials | None:
        return builders.nessie_credentials_for(self.settings)

    @cached_property
    def tokens(self) -> TokenProvider | None:
        return builders.nessie_tokens_for(self.settings)

    @cached_property
    def catalog(self) -> NessieBranches:
        return builders.catalog_for(self.settings, self.tokens)

    @cached_property
    def notifier(self) -> Notifier:
        return builders.notifier_for(self.settings)

    @cached_property
    def reports(self) -> S3ReportStore:
        return builders.reports_for(self.settings, self.s3)

    @cached_property
    def decisions(self) -> DecisionLog:
        return builders.decisions_for(self.settings, self.s3)

    @cached_property
    def results(self) -> S3RequestResults:
        return builders.results_for(self.settings, self.s3)

    @cached_property
    def actions(self) -> S3ActionRecords:
        """Each action asked through the queue (a Slack click, a publish request) recorded once (core.once)."""
        return S3ActionRecords(self.s3, self.settings.lake_bucket)

    @cached_property
    def reader(self) -> IcebergRestReader:
        return builders.reader_for(self.settings, self.tokens)

    @cached_property
    def suites(self) -> AuditSuites:
        return builders.load_suites(self.settings.audits_file, self.settings.namespace)

    @cached_property
    def spark(self) -> SparkSettings:
        return builders.spark_settings_for(self.settings, jars=not self.submitted)

    @cached_property
    def engine(self) -> SparkEngine:
        conf = spark_conf_for(self.spark, self.credentials, local_jars=not self.submitted)
        suites, work_dir, submitted = self.suites, self.settings.work_dir, self.submitted
        return SparkEngine(lambda: spark_session_for(conf, submitted=submitted, work_dir=work_dir),
                           on_start=lambda session: check_custom_sql(session, suites))

    @cached_property
    def writer(self) -> SparkIcebergWriter:
        start_worker()  # the Parquet footers' and pages' worker imports pyarrow while the engine starts
        objects, lake = self.objects, self.settings.lake_bucket
        branches = builders.branch_tables_for(self.settings, self.tokens, objects)
        downloads = self.settings.work_dir / "downloads"  # a file to register too: its pages are measured first

        def download(source: SourceObject, stop: Callable[[], bool]) -> Path:
            return objects.download(source, downloads, stop)

        if self.settings.stage == "s3":  # the cluster's executors read S3 themselves: an exact copy in the lake; the
            return SparkIcebergWriter(self.engine, lambda src, _stop: objects.copy_to(src, lake),  # driver measures
                                      cleanup=objects.remove, lake=objects, branches=branches, download=download)
        return SparkIcebergWriter(self.engine, download, lake=objects, branches=branches)

    @cached_property
    def maintainer(self) -> SparkTableMaintainer:
        return SparkTableMaintainer(self.engine)

    @cached_property
    def config(self) -> PipelineConfig:
        settings = self.settings
        return PipelineConfig(
            default_namespace=settings.namespace, main_branch=settings.main_branch,
            source_buckets=settings.source_buckets, refused_buckets=frozenset({settings.lake_bucket}),
            staging_budget_bytes=settings.staging_budget_bytes, max_inflation=settings.max_inflation,
            # the local disk guards only what is staged there: a copy staged in S3 (the EMR job) is the store's
            free_bytes=None if settings.stage == "s3" else builders.free_bytes_in(settings.work_dir / "downloads"),
            abandoned_after_seconds=settings.abandoned_branch_seconds,
        )

    @cached_property
    def ports(self) -> Ports:
        return Ports(catalog=self.catalog, writer=self.writer, objects=self.objects, reports=self.reports,
                     maintainer=self.maintainer, results=self.audit_results)

    @cached_property
    def audit_results(self) -> LakeAuditResults:
        """Every audited load's measurements, as a results table per audited table in the lake (no JVM)."""
        return LakeAuditResults(builders.branch_tables_for(self.settings, self.tokens, self.objects),
                                self.settings.warehouse)

    @cached_property
    def jobs(self) -> Any:
        """The large-file jobs (EMR Serverless), None when EMR is not configured (or in the EMR job itself)."""
        return None if self.submitted else builders.jobs_for(self.settings, self.s3, self.notifier)

    @cached_property
    def large_files(self) -> LargeFiles | None:
        return None if self.jobs is None else LargeFiles(self.jobs, self.settings.large_file_bytes)

    @cached_property
    def retries(self) -> SqsRetries | None:
        return None if self.submitted else SqsRetries(builders.boto3_client("sqs", self.settings))

    @cached_property
    def events(self) -> EventSink | None:
        bus = self.settings.event_bus
        return EventBridgeSink(builders.boto3_client("events", self.settings), bus) if bus else None

    @cached_property
    def requesters(self) -> StsRequesters:
        """Who asks for a publish, through STS: the operator's `wap publish` signs with it, the service verifies
        with it (the region's STS endpoint, or the local stack's)."""
        settings = self.settings
        endpoint = str(builders.boto3_client("sts", settings).meta.endpoint_url)
        return StsRequesters(endpoint, settings.aws_region, timeout=settings.http_timeout)

    # --- use cases ----------------------------------------------------------------------------------

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

    def audit_file(self, source: SourceObject, table: str | None = None) -> DryRun:
        """`wap audit`: the file's suite on its rows, on a dry-run branch; nothing is published."""
        return audit_without_publishing(source, ports=self.ports, suites=self.suites, config=self.config,
                                        table=table)

    def maintain(self, table: TableRef | None, *, dry_run: bool = False, here: bool = False,
                 out_of_time: Callable[[], bool] = lambda: False) -> list[MaintenanceReport | WapError]:
        """`wap maintain`, its schedule and the EMR job (`here`: never sent to EMR again): one table, or every
        table on main (None). Each table's report, or the error that failed it (the others still run); each is
        logged and counted in the metrics. `out_of_time`: the invocation's deadline (the schedule's Lambda
        context); a table not started for want of time is a DeferredError in the list, logged as deferred."""
        catalog = self.ports.catalog
        tables = [table] if table else [t for t in catalog.list_tables(self.settings.main_branch)
                                        if t.namespace != LEDGER_NAMESPACE]
        emr = None if here or self.settings.emr is None else EmrMaintenanceJobs(
            builders.boto3_client("emr-serverless", self.settings),
            lambda t, day: maintenance_request_for(self.settings, t, day))
        ports = MaintenancePorts(catalog, self.maintainer, emr)
        # the tables' unreferenced files, swept after each one's maintenance (not by the EMR job: its schedule does)
        sweep = None if here else sweep_for(self.settings, self.s3, self.tokens, self.decisions)
        results: list[MaintenanceReport | WapError] = []
        for each in tables:
            try:
                report = maintain_table(each, ports=ports, suite=self.suites.suite_for(each), config=self.config,
                                        dry_run=dry_run, here=here, out_of_time=out_of_time, sweep=sweep)
            except DeferredError as exc:
                log.warning("maintenance of %s deferred: %s", each, exc, extra={"table": each.qualified})
                results.append(exc)
                continue
            except WapError as exc:
                log.error("maintaining %s failed: %s", each, exc, extra={"table": each.qualified})
                results.append(exc)
                continue
            log.info("maintenance of %s: %s", each, report.message, extra={"maintenance": report.to_dict()})
            record_maintenance(report)
            results.append(report)
        return results

    def publish(self, branch: str, *, reason: str | None, actor: str, reaudit: bool) -> Decision:
        """A reviewed branch merged into main (re-audited first unless `reaudit` is False)."""
        return publish_branch(Transactions(self.catalog, self.config), branch, reason=reason, actor=actor,
                              source_of=self.source_of, reaudit=self.reaudit if reaudit else None,
                              decisions=self.decisions)

    def discard(self, branch: str, *, reason: str, actor: str) -> Decision:
        return discard_branch(self.catalog, branch, reason=reason, actor=actor, decisions=self.decisions,
                              default_namespace=self.settings.namespace,
                              source_of=self.source_of)

    def answer(self, request: PublishRequest, message_id: str, queue_arn: str | None = None) -> dict[str, Any]:
        """An operator's publish request (wap_ingest.core.publish_requests) that arrived as SQS message
        `message_id` on `queue_arn`, served with the service's own catalog role: claimed for this message (a
        replay is refused), its age and signature checked, its signer named by STS and checked against
        WAP_PUBLISH_PRINCIPALS, the branch re-audited here and merged; the answer is written once to the lake
        bucket for the waiting `wap publish`. An infrastructure failure raises (the message is retried)."""
        requesters = self.requesters
        return answer_request(
            request, message_id, records=self.actions, ledger=self.results, identify=requesters.identify,
            noted=log.error,
            allowed=self.settings.publish_principals, now=time.time(),
            queue=queue_name_of(queue_arn) if queue_arn else None, describe=requesters.actor,
            publish=lambda req, actor: self.publish(req.branch, reason=req.reason, actor=actor, reaudit=req.reaudit))

    @cached_property
    def slack(self) -> SlackActions:
        """Acting on alerts from Slack: the endpoint's verification and the replies (bootstrap/slack.py)."""
        return SlackActions(self.settings, lambda: self.s3, lambda: builders.boto3_client("sqs", self.settings))

    def act(self, asked: Asked) -> Answer:
        """An action asked from an alert in Slack, run with the use cases the `wap` commands run (core.interactions)."""
        slack = self.slack
        return answer(asked, UseCases(
            publish=lambda branch, reason, actor, reaudit: self.publish(branch, reason=reason, actor=actor,
                                                                        reaudit=reaudit),
            discard=lambda branch, reason, actor: self.discard(branch, reason=reason, actor=actor),
            report=self.reports.load,
            retry=lambda source: self.check().ingest(source),
            dead_letters=lambda queue: [m.line for m in slack.dead_letters(queue).peek()],
            redrive=lambda queue: len(slack.dead_letters(queue).redrive()),
            decided=lambda branch: decided_by(self.catalog, self.decisions, branch, main=self.settings.main_branch,
                                               default_namespace=self.settings.namespace)))

    def actor(self) -> str:
        """Who the decision log records: the `sub` of the access token the catalog client obtains (the identity the
        catalog authorized). Without a Nessie client configured (a catalog without authentication) there is no
        verified identity: WAP_ACTOR or the login name, marked as unverified."""
        tokens = self.tokens
        if tokens is not None:
            return tokens.subject()
        return f"{os.environ.get('WAP_ACTOR') or getpass.getuser()} (unverified: no Nessie client configured)"

    def history(self, table: TableRef, limit: int = 100) -> list[HistoryEntry]:
        return history_for(self.catalog, self.decisions, table, main=self.settings.main_branch, limit=limit)

    def branches(self, table: TableRef | None = None, older_than: timedelta | None = None) -> list[OpenBranch]:
        return open_branches(self.catalog, now=datetime.now(UTC), default_namespace=self.settings.namespace,
                             table=table, older_than=older_than)

    def prune(self, stale: list[OpenBranch], *, dry_run: bool, reason: str, actor: str) -> Pruned:
        return prune_branches(self.catalog, stale, dry_run=dry_run, decisions=self.decisions, reason=reason,
                              actor=actor)

    def sweep_job_runs(self) -> SweepReport | None:
        """The schedule's sweep of the large files' job runs (adapters/aws/emr.py); None when EMR is not configured."""
        return None if self.large_files is None else self.large_files.jobs.sweep()

    def job_runs(self, table: TableRef | None = None) -> list[JobRun]:
        """The large files' EMR job runs (none when EMR is not configured)."""
        jobs = builders.jobs_for(self.settings, self.s3) if self.jobs is None else self.jobs
        return [] if jobs is None else list(jobs.runs(table))

    def source_of(self, table: TableRef, branch: str) -> Mapping[str, str]:
        """(table, WAP branch) -> the source properties of the branch's WAP append, read with PyIceberg (no JVM)."""
        digest = digest_from_branch(branch)
        return {} if digest is None else self.reader.wap_source(table, branch, digest)

    def reaudit(self, table: TableRef, branch: str, identity: str) -> AuditReport:
        """The table's suite, read from the audits file now, run on the rows of the branch's WAP append by the
        pipeline's audit step (this starts Spark)."""
        suites = builders.load_suites(self.settings.audits_file, self.settings.namespace)
        return audit_branch(table, branch, identity, writer=self.writer, suites=suites)
