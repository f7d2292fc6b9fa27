"""A Lambda handler run in-process reconfigures the service's loggers (Powertools' handler, no propagation); the
next test still sees their lines (tests/conftest.py restores them), whichever tests ran before it on its worker."""

from __future__ import annotations

import logging

import pytest

from wap_ingest.entrypoints.lambda_observability import observe


def test_a_handler_run_takes_the_service_loggers_over() -> None:
    logging.getLogger("wap_ingest")  # registered, so observe() configures it
    observe()
    assert logging.getLogger("wap_ingest").propagate is False  # its children's lines stop there


def test_the_next_test_sees_the_service_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        logging.getLogger("wap_ingest.adapters.slack.client").warning("a line for caplog")
    assert "a line for caplog" in caplog.text
