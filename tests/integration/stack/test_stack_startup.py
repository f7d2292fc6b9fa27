"""`wap stack up` beyond one healthy stack (tests/integration/stack/test_stack.py has its lifecycle): two execution
environments, and the failures before or during start-up (ports in use, a missing jar, Nessie failing, a dead
process, bad settings, an old Java), each checked to leave nothing behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.integration.stack.test_stack import gone, isolated_config, processes_on, wap
from wap_ingest.core.errors import ConfigError
from wap_stack.stack import (
    StackConfig,
    StackError,
    find_java,
    load_state,
    port_is_free,
    stack_environment,
    stack_status,
    start_stack,
    stop_stack,
)

pytestmark = pytest.mark.stack


def test_two_workers_run_two_execution_environments_and_down_stops_both(tmp_path: Path) -> None:
    config = isolated_config(tmp_path / "stack", workers=2)
    (config.nessie_store / "left-over").mkdir(parents=True)  # a previous lake's catalog: `up` must not reuse it
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in {
            "WAP_STACK_DIR": config.state_dir, "WAP_STACK_MOTO_PORT": config.moto_port,
            "WAP_STACK_NESSIE_PORT": config.nessie_port, "WAP_STACK_NESSIE_MGMT_PORT": config.nessie_management_port,
            "WAP_STACK_SLACK_PORT": config.slack_port, "WAP_STACK_LAMBDA_PORT": config.lambda_port,
            "WAP_STACK_RUNTIME_PORT": config.runtime_port, "WAP_STACK_WORKERS": 2,
        }.items():
            patch.setenv(variable, str(value))
        try:
            code, out, err = wap("stack", "up")
            assert code == 0, err
            assert not (config.nessie_store / "left-over").exists() and config.nessie_store.is_dir()
            state = load_state(config)
            assert state is not None and state.workers == 2
            first, second = state.environments
            assert (first.invoke_port, first.runtime_port) == (config.lambda_port, config.runtime_port)
            assert (second.invoke_port, second.runtime_port) == (config.lambda_port + 2, config.runtime_port + 2)
            assert first.invoke_url in out and second.invoke_url in out
            assert stack_environment(state) == stack_environment(replace(state, environments=(first,)))

            code, out, _ = wap("stack", "status", "--json")
            report = json.loads(out)
            assert code == 0 and report["healthy"], out
            by_process = {c["process"]: c for c in report["components"]}
            assert list(by_process) == ["moto", "nessie", "queue", "slack", "lambda", "worker", "lambda-2",
                                "worker-2", "keeper"]
            assert by_process["lambda-2"]["name"] == "Lambda runtime (emulator + awslambdaric) #2"
            assert by_process["lambda-2"]["url"] == second.invoke_url
            assert by_process["worker-2"]["log"] == str(config.logs_dir / "worker-2.log")
            assert all(c["alive"] and c["healthy"] and c["pid"] for c in report["components"])
            pids = [first.lambda_pid, first.worker_pid, second.lambda_pid, second.worker_pid]
            assert len(set(pids)) == 4
            for env in state.environments:  # each worker invokes its own runtime
                worker = Path(f"/proc/{env.worker_pid}/cmdline").read_bytes().split(b"\0")
                assert worker[worker.index(b"--invoke-url") + 1] == env.invoke_url.encode()
            for name in ("lambda", "worker", "lambda-2", "worker-2"):
                assert config.log_for(name).is_file()

            code, out, _ = wap("stack", "down")
            assert code == 0 and "SQS worker #2" in out and "Lambda runtime (emulator + awslambdaric) #2" in out
            assert all(gone(pid) for pid in state.pids.values())
            assert port_is_free(second.invoke_port) and port_is_free(second.runtime_port)
            assert not config.nessie_store.exists() and not config.state_file.exists()
        finally:
            stop_stack(config)


def test_the_ports_of_every_execution_environment_are_checked_before_starting(tmp_path: Path) -> None:
    config = isolated_config(tmp_path, workers=3)
    port = config.runtime_port + 4  # the third environment's runtime API
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(ConfigError, match=rf"Port {port} .*environment 3.*already in use.*WAP_STACK_RUNTIME_PORT"):
            start_stack(config)
    assert not config.state_file.exists()
    assert processes_on(config.moto_port) == []
    with pytest.raises(ConfigError, match="must differ"):
        start_stack(replace(config, runtime_port=config.lambda_port + 2))


# --- failures: clear messages, nothing left behind ---------------------------------------------------


@pytest.mark.parametrize(
    ("attribute", "variable"),
    [
        ("moto_port", "WAP_STACK_MOTO_PORT"),
        ("nessie_port", "WAP_STACK_NESSIE_PORT"),
        ("nessie_management_port", "WAP_STACK_NESSIE_MGMT_PORT"),
    ],
)
def test_a_port_in_use_is_named_with_its_variable(tmp_path: Path, attribute: str, variable: str) -> None:
    config = isolated_config(tmp_path)
    port = getattr(config, attribute)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(ConfigError, match=rf"Port {port} .*already in use.*{variable}"):
            start_stack(config)
    assert not config.state_file.exists()
    assert processes_on(config.moto_port) == []


def test_a_missing_nessie_jar_is_named_before_anything_starts(tmp_path: Path) -> None:
    missing = tmp_path / "nessie.jar"
    config = replace(isolated_config(tmp_path), nessie_jar=missing)
    with pytest.raises(ConfigError, match="WAP_NESSIE_JAR") as caught:
        start_stack(config)
    assert str(missing) in str(caught.value)
    assert processes_on(config.moto_port) == [] and not config.state_file.exists()


def test_nessie_failing_to_start_stops_moto_and_names_the_log(tmp_path: Path) -> None:
    config = isolated_config(tmp_path / "stack")
    jar = tmp_path / "broken.jar"
    jar.write_bytes(b"not a jar")
    config = replace(config, nessie_jar=jar)
    config.state_dir.mkdir()
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it
    stale = {"complete": True, "moto_pid": dead, "nessie_pid": dead}
    config.state_file.write_text(json.dumps(stale))  # a stale record must not block `up`

    with pytest.raises(StackError) as caught:
        start_stack(config)
    message = str(caught.value)
    assert "Nessie" in message and "exited during start-up" in message
    assert str(config.nessie_log) in message
    assert processes_on(config.moto_port) == [], "moto must be stopped when Nessie fails"
    assert port_is_free(config.moto_port)
    assert not config.state_file.exists()


def test_one_dead_process_is_reported_as_broken(tmp_path: Path) -> None:
    config = isolated_config(tmp_path)
    config.state_dir.mkdir(exist_ok=True)
    # A pid no process can have (above the kernel's pid_max): an exited process's pid may be reused at once on a
    # busy machine, even by another Nessie.
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    # Stands in for a live moto: the stack recognises its processes by their command line.
    fake_moto = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "moto.server"], start_new_session=True
    )
    try:
        record = {"complete": True, "moto_pid": fake_moto.pid, "nessie_pid": dead_pid}
        config.state_file.write_text(json.dumps(record))
        status = stack_status(config)
        seen = [(c.name, c.pid, c.alive, c.health) for c in status.components]
        assert fake_moto.poll() is None, f"the stand-in moto exited ({fake_moto.returncode}) before the check"
        assert status.broken and not status.healthy, seen
        assert "BROKEN" in status.summary
        assert "wap stack down, then wap stack up" in status.summary
        with pytest.raises(ConfigError, match="wap stack down, then wap stack up"):
            start_stack(config)
        assert stop_stack(config) is True
        assert fake_moto.wait(timeout=5) == -signal.SIGTERM
        assert not config.state_file.exists()
    finally:
        if fake_moto.poll() is None:
            fake_moto.kill()
            fake_moto.wait()


# --- configuration -----------------------------------------------------------------------------------


def test_config_from_env_reads_and_checks_the_variables(tmp_path: Path) -> None:
    config = StackConfig.from_env(
        {"WAP_STACK_DIR": str(tmp_path), "WAP_STACK_MOTO_PORT": "5001", "WAP_NESSIE_JAR": str(tmp_path / "n.jar")}
    )
    assert (config.state_dir, config.moto_port, config.nessie_port) == (tmp_path, 5001, 19120)
    assert config.nessie_jar == tmp_path / "n.jar" and config.nessie_log == tmp_path / "logs" / "nessie.log"
    with pytest.raises(ConfigError, match="WAP_STACK_NESSIE_PORT"):
        StackConfig.from_env({"WAP_STACK_NESSIE_PORT": "http"})
    assert config.workers == 1 and config.nessie_store == tmp_path / "nessie-store"
    config = StackConfig.from_env({"WAP_STACK_WORKERS": "3", "WAP_STACK_LAMBDA_PORT": "20000"})
    assert config.environment_ports() == [(20000, 19124), (20002, 19126), (20004, 19128)]
    for bad in ("0", "two", "99"):
        with pytest.raises(ConfigError, match="WAP_STACK_WORKERS"):
            StackConfig.from_env({"WAP_STACK_WORKERS": bad})


def test_a_java_older_than_21_is_refused_with_the_fix() -> None:
    old = sorted(Path("/usr/lib/jvm").glob("java-17*/bin/java"))
    if not old:
        pytest.skip("no Java 17 installed here")
    with pytest.raises(ConfigError, match=r"WAP_NESSIE_JAVA=.* is Java 17; .*needs Java 21\+.*install a JDK 21"):
        find_java(old[0])
