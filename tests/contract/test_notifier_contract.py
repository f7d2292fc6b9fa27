"""One behaviour suite for the Notifier port, run against the in-memory fake, LogNotifier, and SlackNotifier with the
real slack-sdk WebClient posting to the stack's Slack sink over HTTP: an alert delivered is True; an endpoint that
fails (unreachable, an API error, a server error, too slow) is False and never raised (an alert outage must not
change an ingestion's outcome)."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.fakes import FakeNotifier
from wap_ingest.core.alerts import Alert, alert_for_failure
from wap_ingest.core.models import SourceObject
from wap_ingest.core.ports import Notifier
from wap_stack.processes import free_port

TOKEN = "contract-token-never-logged"


@dataclass
class Harness:
    notifier: Notifier
    received: Callable[[], list[str]]  # the texts the endpoint got, outside the port


def alert() -> Alert:
    return alert_for_failure(SourceObject("source", f"orders/{uuid.uuid4().hex}.parquet"), "Nessie is down",
                             attempt=1, final=False)


class _Kept(logging.Handler):
    """The records of one logger, on the logger itself: independent of how an earlier test (the Lambda handler's
    Powertools logger) wired propagation to the root, where caplog listens."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[_Kept]:
    logger, handler = logging.getLogger("wap_ingest.adapters.slack.client"), _Kept()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture(params=["fake", "log", pytest.param("slack", marks=pytest.mark.stack)])
def delivering(request: pytest.FixtureRequest) -> Harness:
    if request.param == "fake":
        fake = FakeNotifier()
        return Harness(fake, lambda: [a.text for a in fake.alerts])
    if request.param == "log":
        from wap_ingest.adapters.slack.client import LogNotifier

        kept: _Kept = request.getfixturevalue("kept")
        return Harness(LogNotifier(), lambda: [r.getMessage() for r in kept.records])
    from wap_ingest.adapters.slack.client import SlackNotifier, slack_client_for

    env: dict[str, str] = request.getfixturevalue("stack_env")
    base = env["WAP_SLACK_BASE_URL"]

    def received() -> list[str]:
        with urllib.request.urlopen(base.removesuffix("/").removesuffix("/api") + "/messages", timeout=5) as reply:
            return [str(m["text"]) for m in json.load(reply) if m["channel"] == env["SLACK_CHANNEL"]]

    client = slack_client_for(env["SLACK_TOKEN"], base, 5)
    return Harness(SlackNotifier(client, env["SLACK_CHANNEL"]), received)


def test_a_delivered_alert_is_true_and_arrives(delivering: Harness) -> None:
    sent = alert()
    assert delivering.notifier.notify(sent) is True
    assert any(sent.title in text and "orders/" in text for text in delivering.received())


class _Failing(BaseHTTPRequestHandler):
    """A Slack that answers every call badly; the path's first segment after /api/ is ignored, the server's mode
    decides: `error` (HTTP 200, ok=false), `status` (HTTP 500), `slow` (answers after the client's timeout)."""

    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = self.server.mode
        if mode == "slow":
            time.sleep(3)
        refused = (200, b'{"ok": false, "error": "fatal_error"}')
        status, body = (500, b"upstream failed") if mode == "status" else refused
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up


@pytest.fixture
def failing_slack(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """Start a failing Slack in one mode; returns its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(mode: str) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
        server.mode = mode  # type: ignore[attr-defined]
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/api/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["fake-down", "slack-unreachable", "slack-api-error", "slack-server-error", "slack-too-slow"])
def failing(request: pytest.FixtureRequest, failing_slack: Callable[[str], str]) -> Notifier:
    if request.param == "fake-down":
        fake = FakeNotifier()
        fake.down = True
        return fake
    from wap_ingest.adapters.slack.client import SlackNotifier, slack_client_for

    mode = request.param.removeprefix("slack-")
    url = {"unreachable": f"http://127.0.0.1:{free_port()}/api/", "api-error": failing_slack("error"),
           "server-error": failing_slack("status"), "too-slow": failing_slack("slow")}[mode]
    return SlackNotifier(slack_client_for(TOKEN, url, 1), "#data-alerts")


def test_a_failing_endpoint_is_false_and_never_raised(failing: Notifier, kept: _Kept) -> None:
    assert failing.notify(alert()) is False
    logged = " ".join(r.getMessage() for r in kept.records)
    assert TOKEN not in logged


def test_log_notifier_never_raises_when_the_log_cannot_be_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from wap_ingest.adapters.slack.client import LogNotifier

    closed = io.StringIO()
    closed.close()
    handler = logging.StreamHandler(closed)
    logger = logging.getLogger("wap_ingest.adapters.slack.client")
    monkeypatch.setattr(logging, "raiseExceptions", False)  # as in production; True only prints the error
    logger.addHandler(handler)
    try:
        LogNotifier().notify(alert())  # the port's rule: whatever it returns, it does not raise
    finally:
        logger.removeHandler(handler)
