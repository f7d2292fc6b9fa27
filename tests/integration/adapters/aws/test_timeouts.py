"""Every network call has a timeout (WAP_HTTP_TIMEOUT): against a server that accepts connections and never answers,
the lake reader (PyIceberg's REST client sets none of its own) and the secret reader give up in about that time with
an error that says what failed, instead of hanging the function until Lambda kills it."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from wap_ingest.adapters.aws.secrets import secret_from_parameter
from wap_ingest.adapters.catalog.reader import IcebergRestReader
from wap_ingest.core.errors import CatalogUnavailableError, InfrastructureError
from wap_ingest.core.models import TableRef


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback server that accepts every connection (the kernel's backlog) and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_the_lake_reader_gives_up_after_its_timeout(silent: str) -> None:
    reader = IcebergRestReader(silent, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError, match=r"timed out"):
        reader.row_count(TableRef("wap", "t"), "main")
    assert time.monotonic() - started < 10


def test_the_secret_reader_gives_up_after_its_timeout(silent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ENDPOINT_URL": silent, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    # an outage of SSM, not a setting (adapters/aws/errors.py): retried, and the variable still named
    with pytest.raises(InfrastructureError, match=r"WAP_SLACK_TOKEN_PARAMETER='/wap/slack-token': cannot read.*"
                                                  r"ReadTimeoutError"):
        secret_from_parameter("/wap/slack-token", variable="WAP_SLACK_TOKEN_PARAMETER", what="the Slack token",
                              timeout=1.0)
    assert time.monotonic() - started < 15
