"""The pieces of a healing stack and of its queue that need no process: what is down and what may be restarted, the
settings a restart starts a part with, moto's command with the queue server behind it, which requests it forwards,
and the queue server's configuration (tests/e2e/test_stack_heals.py runs them for real)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from wap_stack import processes, queue
from wap_stack.components import DEAD_LETTER_QUEUE, EVENTS_QUEUE, HELD
from wap_stack.config import StackConfig, config_from_json, config_to_json
from wap_stack.heal import down_parts, lake_lost
from wap_stack.moto_queue import Forwarder, queue_name_of
from wap_stack.processes import process_alive
from wap_stack.stack import lake_moto_command

DEAD = 2**22 + 1  # above any pid_max: no process has it


class FakeResponse:
    def __init__(self, params: dict[str, str], querystring: dict[str, list[str]] | None = None) -> None:
        self.params, self.querystring = params, querystring or {}

    def _get_param(self, name: str) -> Any:
        return self.params.get(name)


def test_the_settings_a_stack_was_started_with_come_back_from_its_record(tmp_path: Path) -> None:
    config = StackConfig(state_dir=tmp_path, moto_port=1234, queue_port=4321, workers=2, image="img", iam=True,
                         nessie_java=tmp_path / "java", visibility_seconds=1500)

    assert config_from_json(config_to_json(config)) == config
    assert config_from_json({**config_to_json(config), "unknown_later": 1}) == config


def test_down_parts_are_the_dead_ones_but_for_those_stopped_on_purpose() -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "moto.server"])
    try:
        record = {"moto_pid": alive.pid, "nessie_pid": DEAD, "queue_pid": DEAD, "slack_pid": DEAD}
        assert sorted(down_parts(record)) == ["nessie", "queue", "slack"]
        assert sorted(down_parts(record | {HELD: ["nessie"]})) == ["queue", "slack"]
        assert lake_lost(record) is None
    finally:
        alive.kill()
        alive.wait()
    lost = lake_lost({"moto_pid": DEAD, "nessie_pid": DEAD})
    assert lost is not None and "wap stack down" in lost and "memory" in lost


def test_a_part_just_started_is_alive_though_its_exec_is_not_done() -> None:
    """Popen returns once the kernel has swapped in the child's new memory, before it has copied the arguments there:
    for that moment /proc/PID/cmdline is empty (observed in most tries on a loaded machine, and it failed the CI run
    of d9d41a9). The check reads again rather than call a starting part dead."""
    for _ in range(20):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "moto.server"])
        try:
            assert process_alive("moto", child.pid)
        finally:
            child.kill()
            child.wait()
        assert not process_alive("moto", child.pid)


def test_an_empty_command_line_is_read_again_before_the_part_is_called_dead(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The exec window made certain: a live pid whose command line is empty for 50 ms, then moto's."""
    entry = tmp_path / str(os.getpid())
    entry.mkdir()
    (entry / "stat").write_text(f"{os.getpid()} (python) S 1 1 1")
    (entry / "cmdline").write_bytes(b"")
    monkeypatch.setattr(processes, "_PROC", tmp_path)
    timer = threading.Timer(0.05, lambda: (entry / "cmdline").write_bytes(b"python\0-m\0moto.server\0"))
    timer.start()
    try:
        assert process_alive("moto", os.getpid())
    finally:
        timer.join()
    (entry / "cmdline").write_bytes(b"")
    (entry / "stat").write_text(f"{os.getpid()} (python) Z 1 1 1")
    assert not process_alive("moto", os.getpid())


def test_moto_runs_behind_the_queue_wrapper_with_or_without_iam(tmp_path: Path) -> None:
    config = StackConfig(state_dir=tmp_path, moto_port=5001, queue_port=5002)

    plain = lake_moto_command(config)
    assert plain[1:3] == ["-m", "wap_stack.moto_queue"]
    assert plain[plain.index("--queue-endpoint") + 1] == "http://127.0.0.1:5002"
    assert plain[plain.index("--queues") + 1].split(",") == [EVENTS_QUEUE, DEAD_LETTER_QUEUE]
    assert plain[-4:] == ["-H", "127.0.0.1", "-p", "5001"]
    with_iam = lake_moto_command(StackConfig(state_dir=tmp_path, moto_port=5001, queue_port=5002, iam=True))
    assert "--decisions" in with_iam and with_iam[-4:] == ["-H", "127.0.0.1", "-p", "5001"]


@pytest.mark.parametrize(("params", "query", "name"), [
    ({"QueueUrl": "http://127.0.0.1:5000/123456789012/wap-events"}, {}, "wap-events"),
    ({"QueueName": "wap-events-dlq"}, {}, "wap-events-dlq"),
    ({}, {"QueueUrl": ["http://127.0.0.1:5000/123456789012/wap-downstream"]}, "wap-downstream"),
    ({}, {}, None),
])
def test_the_queue_a_request_is_about(params: dict[str, str], query: dict[str, list[str]], name: str | None) -> None:
    assert queue_name_of(FakeResponse(params, query)) == name


def test_a_notification_the_queue_server_never_takes_is_logged_not_dropped_unseen() -> None:
    lines: list[str] = []
    forwarder = Forwarder("http://127.0.0.1:9")  # the discard port: nothing answers there

    assert forwarder.deliver("http://127.0.0.1:9/123456789012/wap-events", '{"Records": []}', patience=0.5,
                             log=lines.append) is False
    assert len(lines) == 1 and "NOT delivered" in lines[0] and "wap-events" in lines[0]


def test_the_queue_server_keeps_its_store_on_disk_and_names_queues_as_moto_does(tmp_path: Path) -> None:
    config = StackConfig(state_dir=tmp_path, moto_port=5001, queue_port=5002, region="eu-west-1")

    text = queue.write_settings(config).read_text()

    assert 'node-address { protocol = http, host = "127.0.0.1", port = 5001' in text  # moto's address in queue URLs
    assert "bind-port = 5002" in text and 'bind-hostname = "127.0.0.1"' in text
    assert f'accountId = "{queue.ACCOUNT}"' in text and 'region = "eu-west-1"' in text
    assert f"jdbc:h2:{tmp_path / 'queue-store' / 'messages'}" in text and "sqs-limits = strict" in text
    command = queue.queue_command(config, Path("/usr/bin/java"), Path("/jars"))
    assert command[0] == "/usr/bin/java" and command[-3:] == ["-cp", "/jars/*", queue.MAIN_CLASS]
    queue.reset_store(config)
    assert not queue.store(config).exists()
