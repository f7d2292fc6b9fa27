"""`wap dashboard` runs Streamlit in a process of its own: stopping the command stops the server too, whether by
Ctrl-C (SIGINT), SIGTERM, or the command's own death (SIGKILL). The server only has to answer its health check
here, so the settings point nowhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from wap_stack.leftovers import port_holders
from wap_stack.processes import free_ports


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def start_dashboard(port: int) -> tuple[subprocess.Popen[bytes], int]:
    env = os.environ | {"LAKE_BUCKET": "lake", "SOURCE_BUCKET": "source", "NESSIE_ENDPOINT": "http://127.0.0.1:9",
                        "AWS_REGION": "us-east-1"}
    command = subprocess.Popen([sys.executable, "-m", "wap_ingest.entrypoints.cli", "dashboard", "--port", str(port)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok":
                break
        except requests.RequestException:
            pass
        assert command.poll() is None and time.monotonic() < deadline, "wap dashboard did not start"
        time.sleep(0.5)
    [server] = children(command.pid)
    assert "streamlit" in Path(f"/proc/{server}/cmdline").read_bytes().decode(errors="replace")
    return command, server


def gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_stopping_wap_dashboard_stops_its_streamlit_server(stop: signal.Signals) -> None:
    [port] = free_ports(1)
    command, server = start_dashboard(port)
    try:
        command.send_signal(stop)
        code = command.wait(timeout=30)

        assert gone(server), f"the Streamlit server (pid {server}) outlived `wap dashboard` ({stop.name})"
        assert port_holders(port) == []
        assert code == (-signal.SIGKILL if stop is signal.SIGKILL else 0)
    finally:
        for pid in (command.pid, server):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        command.wait()
