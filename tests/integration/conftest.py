"""Fixtures shared by the integration modules: the setup_aws harness's moto server and Lightsail stub, a local Slack
sink."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.setup_aws_harness import lightsail, moto_url  # noqa: F401 (fixtures)
from wap_stack.processes import free_port
from wap_stack.slack_sink import _SinkServer


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local Slack sink in this process: its API URL (for slack-sdk's base_url) and the file it records to."""
    record = tmp_path / "alerts.jsonl"
    server = _SinkServer(free_port(), record)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/", record
    finally:
        server.shutdown()
        server.server_close()
