"""The composition root hands each entry point its use cases, built once per process and kept for warm invocations,
from the process's Service: what a test swaps in the Service (`replaced`) is what the handler's use cases use, and
nothing is built before a request needs it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import FakeNotifier
from tests.unit.entrypoints.test_lambda_handler import World
from wap_ingest import bootstrap
from wap_ingest.bootstrap import FunctionUseCases, OperatorCommands, PipelineCommands, Service
from wap_ingest.core.alerts import AlertKind
from wap_ingest.core.dead_letters import QueueAlarm


def test_the_functions_use_cases_are_built_once_per_process_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    built: list[Service] = []

    def service() -> Service:
        built.append(world.service)
        return world.service

    monkeypatch.setattr(bootstrap, "_cache", {})
    monkeypatch.setattr(bootstrap, "service", service)
    first = bootstrap.function()
    assert bootstrap.function() is first and len(built) == 1  # a warm invocation: nothing built again
    assert first.deliveries is first.deliveries and first.operations is first.operations
    assert first.max_receives == 3  # WAP_MAX_RECEIVES, the event reader's one parameter


def test_what_a_test_swaps_in_the_service_is_what_the_use_cases_use() -> None:
    world = World()
    other = FakeNotifier()
    uses = FunctionUseCases(world.service.replaced(notifier=other))
    uses.operations.alarm(QueueAlarm("dlq-alarm", "ALARM", "3 messages", "wap-ingest-dlq", "now"))
    assert [a.kind for a in other.alerts] == [AlertKind.INFRASTRUCTURE] and world.notifier.alerts == []


def test_nothing_is_built_before_a_request_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The function's families, the operator's and the pipeline's commands build no adapter when they are handed
    over: the notifier (its token may come from the secret store) is built with the first alert."""
    asked: list[str] = []
    real = Service.__dict__["notifier"]

    def notifier(self: Service) -> Any:
        asked.append("notifier")
        return real.func(self)

    world = World()
    settings = world.service.settings
    monkeypatch.setattr(Service, "notifier", property(notifier))
    service = Service(settings, ports=world.service.ports, suites=world.service.suites, config=world.service.config)
    uses = FunctionUseCases(service)
    _ = uses.deliveries, uses.operations, uses.slack, OperatorCommands(service), PipelineCommands(service)
    assert asked == []
