"""The composition root: Settings -> adapters (builders.py, one function per adapter; root.py's Service builds each
once, on first use, and keeps it) -> the use cases each entry point is handed (use_cases.py for the function and the
Slack endpoint, commands.py for each `wap` command family, emr_job.py for the EMR job). Built once per process and
cached, so warm Lambda invocations (and a long `wap ingest` run) reuse one engine and one set of clients. Adapters get
plain values and clients from here, never the Settings; entry points get use cases, never the Service.

| entry point | gets | from |
|---|---|---|
| the Lambda function (`entrypoints/lambda_handler.py`) | `FunctionUseCases` | `function()`: cached per process |
| the interactivity endpoint (`slack_interactivity.py`) | `SlackEndpointUseCases` | `slack_endpoint()`: cached |
| the EMR job (`emr_job.py`) | `EmrJobUseCases` | `emr_job()` |
| `wap ingest`, `wap audit`, `wap maintain` | `PipelineCommands` | `pipeline_commands()`: the cached Service |
| `wap branches`... `wap tables`, `wap publish` | `OperatorCommands` | `operator_commands()` |
| `wap dlq` | `DeadLetterCommands` | `dead_letter_commands(dlq_url, queue_url)` |

Tests and benchmarks build a `Service` themselves (with fakes: `Service(settings, ports=..., notifier=...)`, or
`service.replaced(...)`) and hand an entry point the use cases built from it (`FunctionUseCases(service)`...).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from wap_ingest.bootstrap.config import Settings

from .builders import (
    boto3_client,
    catalog_for,
    decisions_for,
    jobs_for,
    load_suites,
    nessie_credentials_for,
    nessie_tokens_for,
    notifier_for,
    reader_for,
    reports_for,
    results_for,
    spark_settings_for,
)
from .commands import (
    DeadLetterCommands,
    OperatorCommands,
    PipelineCommands,
    PublishRequests,
    dead_letter_commands_for,
)
from .emr_job import EmrJobUseCases
from .root import Service
from .use_cases import (
    FunctionUseCases,
    OperationUseCases,
    SlackActionUseCases,
    SlackEndpointUseCases,
    slack_endpoint_for,
)

log = logging.getLogger(__name__)

__all__ = ["DeadLetterCommands", "EmrJobUseCases", "FunctionUseCases", "OperationUseCases", "OperatorCommands",
           "PipelineCommands", "PublishRequests", "Service", "SlackActionUseCases", "SlackEndpointUseCases",
           "boto3_client", "build_service", "catalog_for", "check_settings", "dead_letter_commands", "decisions_for",
           "emr_job", "function", "jobs_for", "load_suites", "nessie_credentials_for", "nessie_tokens_for",
           "notifier_for", "operations", "operator_commands", "pipeline_commands", "reader_for", "reports_for",
           "results_for", "service", "slack_endpoint", "slack_endpoint_for", "spark_settings_for"]

T = TypeVar("T")


def build_service(settings: Settings, *, submitted: bool = False) -> Service:
    """A Service for the pipeline, checked (audits, jars, the catalog client's secret) before anything starts.
    `submitted`: the process was started by spark-submit (the EMR job)."""
    return Service(settings, submitted=submitted).check()


_lock = threading.RLock()
_cache: dict[str, Any] = {}


def _once(name: str, build: Callable[[], T]) -> T:
    with _lock:
        if name not in _cache:
            _cache[name] = build()
        found: T = _cache[name]
        return found


def operations() -> Service:
    """An operator command's Service, from the environment as it is now (a `wap` process runs one command): it
    builds only the adapters the command touches, each once (never the engine unless it re-audits)."""
    return Service(Settings.from_env())


def service() -> Service:
    """The process-wide Service for the pipeline's entry points (the function, `wap ingest`, the EMR job), built on
    first use from the environment and checked; warm invocations reuse it."""
    def build() -> Service:
        started = time.monotonic()
        built = Service(Settings.from_env()).check()
        log.info("service built (once per process; warm invocations reuse it) in %.2fs", time.monotonic() - started)
        return built

    return _once("service", build)


def function() -> FunctionUseCases:
    """The Lambda function's use cases, built on first use from the process's Service; warm invocations reuse them."""
    return _once("function", lambda: FunctionUseCases(service()))


def slack_endpoint() -> SlackEndpointUseCases:
    """The interactivity endpoint's use cases (no engine: the endpoint only verifies and forwards), built once."""
    return _once("slack_endpoint", lambda: slack_endpoint_for(operations()))


def emr_job() -> EmrJobUseCases:
    """The EMR job's use cases, from the job's environment (a job runs once per process)."""
    return EmrJobUseCases(Settings.from_env())


def pipeline_commands() -> PipelineCommands:
    """`wap ingest`, `wap audit` and `wap maintain`: the process's checked Service."""
    return PipelineCommands(service())


def operator_commands() -> OperatorCommands:
    """The operator's commands, from the environment as it is now."""
    return OperatorCommands(operations())


def dead_letter_commands(dead_letter_url: str, queue_url: str) -> DeadLetterCommands:
    return dead_letter_commands_for(operations(), dead_letter_url, queue_url)


def check_settings() -> None:
    """Fail now, naming the variable and the fix, when a setting is missing or invalid (`wap dashboard`)."""
    Settings.from_env()
