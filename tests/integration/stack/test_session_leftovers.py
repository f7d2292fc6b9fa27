"""The test session's own check (tests/conftest.py): a process the session started that is still running after its
teardown fails the run, is named, and is killed; a session that stops what it starts passes. Run as a session of
its own (a pytest process with tests/conftest.py as its plugin) on two small test files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import SESSION_VARIABLE
from tests.paths import ROOT

LEAKY = '''
import subprocess, sys

def test_starts_a_server_and_forgets_it():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
'''
TIDY = '''
import subprocess, sys

def test_starts_a_server_and_stops_it():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    child.terminate()
    child.wait()
'''


def session(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_inner.py"
    test.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != SESSION_VARIABLE}  # a session of its own
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(tmp_path), "-p", "tests.conftest", str(test)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_process_left_running_fails_the_session_and_is_killed(tmp_path: Path) -> None:
    result = session(tmp_path, LEAKY)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "1 process(es) the test session started are still running after its teardown" in result.stdout
    [pid] = [int(p) for p in re.findall(r"pid (\d+) \(\S*python\S* -c import time; time.sleep\(600\)\)", result.stdout)]
    assert not alive(pid)


def test_a_session_that_stops_what_it_starts_passes(tmp_path: Path) -> None:
    result = session(tmp_path, TIDY)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "still running" not in result.stdout
