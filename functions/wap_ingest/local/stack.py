"""The local stack: a moto S3 server and a Nessie server, run as two processes that live and die together.

Both keep their state in memory, and the catalog must never outlive the object store it points at, so
`start_stack` starts both or neither, `stop_stack` stops both, and `stack_status` reports a stack with one
process dead as broken. Pids, ports and buckets are recorded in <state_dir>/state.json (written as soon as
a process is started, so an interrupted start-up can still be cleaned up); each process writes its output
to <state_dir>/logs/<component>.log.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import requests

import wap_ingest
from wap_ingest.core.errors import ConfigError, InfrastructureError

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
WAREHOUSE = "warehouse"
NESSIE_VERSION = "0.99.0"
MIN_JAVA = 21
HOST = "127.0.0.1"

MOTO = "moto"
NESSIE = "nessie"
LABELS = {MOTO: "moto (S3)", NESSIE: "Nessie"}
# A recorded pid is only "ours" while its command line still contains this (guards against pid reuse).
_MARKERS = {MOTO: "moto.server", NESSIE: "nessie.version.store.type"}
_PORT_VARIABLES = {
    "moto_port": ("WAP_STACK_MOTO_PORT", "moto S3 server"),
    "nessie_port": ("WAP_STACK_NESSIE_PORT", "Nessie API"),
    "nessie_management_port": ("WAP_STACK_NESSIE_MGMT_PORT", "Nessie management/health"),
}
_STOP_GRACE = 10.0
_POLL = 0.2
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')

# Processes started by this interpreter. A child that exits stays a zombie (and looks alive to kill(pid, 0))
# until its parent waits for it, so children are polled and reaped through their Popen objects.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class StackError(InfrastructureError):
    """A local stack component failed to start. The message names the component and its log file."""


def repo_root() -> Path:
    return Path(wap_ingest.__file__).resolve().parents[2]


def default_state_dir() -> Path:
    return repo_root() / ".wap" / "stack"


def default_nessie_jar() -> Path:
    return repo_root() / ".cache" / "jars" / "nessie" / f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"


@dataclass(frozen=True)
class StackConfig:
    state_dir: Path = field(default_factory=default_state_dir)
    moto_port: int = 5000
    nessie_port: int = 19120
    nessie_management_port: int = 19121
    source_bucket: str = "source"
    lake_bucket: str = "lake"
    region: str = "us-east-1"
    startup_timeout: float = 90.0
    nessie_jar: Path = field(default_factory=default_nessie_jar)
    nessie_java: Path | None = None  # None: the newest installed Java >= MIN_JAVA

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackConfig:
        env = os.environ if env is None else env
        defaults = cls()
        java = env.get("WAP_NESSIE_JAVA", "").strip()
        return cls(
            state_dir=_path(env, "WAP_STACK_DIR") or defaults.state_dir,
            moto_port=_port(env, "WAP_STACK_MOTO_PORT", defaults.moto_port),
            nessie_port=_port(env, "WAP_STACK_NESSIE_PORT", defaults.nessie_port),
            nessie_management_port=_port(env, "WAP_STACK_NESSIE_MGMT_PORT", defaults.nessie_management_port),
            startup_timeout=_seconds(env, "WAP_STACK_TIMEOUT", defaults.startup_timeout),
            nessie_jar=_path(env, "WAP_NESSIE_JAR") or defaults.nessie_jar,
            nessie_java=Path(java).expanduser() if java else None,
        )

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def moto_log(self) -> Path:
        return self.logs_dir / "moto.log"

    @property
    def nessie_log(self) -> Path:
        return self.logs_dir / "nessie.log"


def _path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name, "").strip()
    return Path(value).expanduser().resolve() if value else None


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ConfigError(f"{name}={value!r} is not a TCP port. Fix: export {name}=<1-65535>, or unset it.")
    return int(value)


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ConfigError(f"{name}={value!r} is not a positive number of seconds. Fix: export {name}=90.")
    return seconds


@dataclass(frozen=True)
class StackState:
    state_dir: Path
    moto_pid: int
    nessie_pid: int
    moto_port: int
    nessie_port: int
    nessie_management_port: int
    source_bucket: str
    lake_bucket: str
    region: str
    moto_log: Path
    nessie_log: Path
    started_at: str
    moto_seconds: float
    nessie_seconds: float

    @property
    def moto_url(self) -> str:
        return f"http://{HOST}:{self.moto_port}"

    @property
    def nessie_url(self) -> str:
        return f"http://{HOST}:{self.nessie_port}"

    @property
    def nessie_health_url(self) -> str:
        return f"http://{HOST}:{self.nessie_management_port}/q/health/ready"

    @property
    def pids(self) -> dict[str, int]:
        return {MOTO: self.moto_pid, NESSIE: self.nessie_pid}

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        return {**data, "moto_url": self.moto_url, "nessie_url": self.nessie_url}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StackState:
        return cls(
            state_dir=Path(data["state_dir"]),
            moto_pid=int(data["moto_pid"]),
            nessie_pid=int(data["nessie_pid"]),
            moto_port=int(data["moto_port"]),
            nessie_port=int(data["nessie_port"]),
            nessie_management_port=int(data["nessie_management_port"]),
            source_bucket=str(data["source_bucket"]),
            lake_bucket=str(data["lake_bucket"]),
            region=str(data["region"]),
            moto_log=Path(data["moto_log"]),
            nessie_log=Path(data["nessie_log"]),
            started_at=str(data["started_at"]),
            moto_seconds=float(data["moto_seconds"]),
            nessie_seconds=float(data["nessie_seconds"]),
        )


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    alive: bool
    url: str
    health_url: str
    healthy: bool
    health: str
    log: Path


@dataclass(frozen=True)
class StackStatus:
    state_file: Path
    recorded: bool
    components: tuple[ComponentStatus, ...]
    complete: bool = True  # False: the `up` that recorded it did not finish

    @property
    def healthy(self) -> bool:
        return self.recorded and self.complete and all(c.healthy for c in self.components)

    @property
    def broken(self) -> bool:
        return any(c.alive for c in self.components) and not all(c.alive for c in self.components)

    @property
    def summary(self) -> str:
        if not self.recorded:
            return "The local stack is not running. Start it: wap stack up"
        if self.healthy:
            return "The local stack is running and healthy."
        dead = ", ".join(c.name for c in self.components if not c.alive)
        if self.broken:
            return (
                f"The local stack is BROKEN: {dead} is not running while the other process is. The catalog "
                "must not outlive the object store it points at. Fix: wap stack down, then wap stack up"
            )
        if not any(c.alive for c in self.components):
            return "The local stack is not running (its processes are gone). Fix: wap stack down, then wap stack up"
        if not self.complete:
            return (
                "The local stack's start-up did not finish (an interrupted or concurrent `wap stack up`). "
                "Fix: wap stack down, then wap stack up"
            )
        return "The local stack is running but not healthy (see health above and the logs)."

    def to_json(self) -> dict[str, Any]:
        components = [{**asdict(c), "log": str(c.log)} for c in self.components]
        return {
            "state_file": str(self.state_file),
            "recorded": self.recorded,
            "complete": self.complete,
            "healthy": self.healthy,
            "broken": self.broken,
            "summary": self.summary,
            "components": components,
        }


def stack_environment(state: StackState) -> dict[str, str]:
    """The variables that point the service, boto3 and Spark at the local stack."""
    return {
        "AWS_ENDPOINT_URL": state.moto_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": state.region,
        "AWS_DEFAULT_REGION": state.region,
        "SOURCE_BUCKET": state.source_bucket,
        "LAKE_BUCKET": state.lake_bucket,
        "NESSIE_ENDPOINT": state.nessie_url,
        "WAP_STACK_DIR": str(state.state_dir),
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (all held open together while choosing, so they cannot repeat)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is fine
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


# --- Java -------------------------------------------------------------------------------------------


def java_major(java: Path) -> int | None:
    """The major version `java -version` reports (8 for 1.8), or None if it does not run."""
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = _JAVA_VERSION.search(done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def find_java(explicit: Path | None = None, java_home: str | None = None) -> Path:
    """The java to run Nessie with: `explicit` (WAP_NESSIE_JAVA) if given, else the newest Java >= 21."""
    fix = (
        f"Fix: install a JDK {MIN_JAVA} or newer (e.g. Temurin {MIN_JAVA}), or point WAP_NESSIE_JAVA at its "
        "bin/java (export WAP_NESSIE_JAVA=/usr/lib/jvm/<jdk>/bin/java)."
    )
    if explicit is not None:
        major = java_major(explicit)
        if major is None:
            raise ConfigError(f"WAP_NESSIE_JAVA={explicit} does not run as `java -version`. {fix}")
        if major < MIN_JAVA:
            raise ConfigError(
                f"WAP_NESSIE_JAVA={explicit} is Java {major}; Nessie {NESSIE_VERSION} needs Java {MIN_JAVA}+. {fix}"
            )
        return explicit
    candidates = [Path(java_home) / "bin" / "java"] if java_home else []
    candidates += sorted(Path("/usr/lib/jvm").glob("*/bin/java"))
    candidates += sorted(Path("/Library/Java/JavaVirtualMachines").glob("*/Contents/Home/bin/java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    seen: set[Path] = set()
    found: list[tuple[int, Path]] = []
    for candidate in candidates:
        real = candidate.resolve()
        if real in seen or not real.is_file():
            continue
        seen.add(real)
        major = java_major(candidate)
        if major is not None:
            found.append((major, candidate))
    usable = [item for item in found if item[0] >= MIN_JAVA]
    if not usable:
        listed = ", ".join(f"{path} (Java {major})" for major, path in found) or "no java at all"
        raise ConfigError(f"No Java {MIN_JAVA}+ found to run Nessie {NESSIE_VERSION} (found: {listed}). {fix}")
    return max(usable, key=lambda item: item[0])[1]


# --- commands ---------------------------------------------------------------------------------------


def moto_command(config: StackConfig) -> list[str]:
    return [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(config.moto_port)]


def nessie_command(config: StackConfig, java: Path) -> list[str]:
    s3 = "nessie.catalog.service.s3.default-options"
    settings = {
        "quarkus.http.host": HOST,
        "quarkus.http.port": str(config.nessie_port),
        "quarkus.management.host": HOST,
        "quarkus.management.port": str(config.nessie_management_port),
        "nessie.version.store.type": "IN_MEMORY",
        "nessie.catalog.default-warehouse": WAREHOUSE,
        f"nessie.catalog.warehouses.{WAREHOUSE}.location": f"s3://{config.lake_bucket}/{WAREHOUSE}/",
        f"{s3}.endpoint": f"http://{HOST}:{config.moto_port}/",
        f"{s3}.path-style-access": "true",
        f"{s3}.region": config.region,
        # Nessie 0.99 resolves secrets from Quarkus config: the access key names a secret whose
        # `.name`/`.secret` hold the key id and the secret key (`nessie.catalog.secrets.*` does not work).
        f"{s3}.access-key": "urn:nessie-secret:quarkus:wap-secrets.s3",
        "wap-secrets.s3.name": ACCESS_KEY,
        "wap-secrets.s3.secret": SECRET_KEY,
    }
    # C1 only and the serial GC: start-up drops from ~7 s to ~3 s; a local in-memory catalog needs no more.
    jvm = ["-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    return [str(java), *jvm, *(f"-D{k}={v}" for k, v in settings.items()), "-jar", str(config.nessie_jar)]


# --- processes --------------------------------------------------------------------------------------


def _spawn(name: str, command: list[str], log: Path, env: Mapping[str, str]) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        out.write(f"$ {shlex.join(command)}\n".encode())
        out.flush()
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,  # its own process group: `down` stops it and anything it forked
            )
        except OSError as exc:
            raise StackError(f"{LABELS[name]} could not be started ({exc}). Log: {log}") from exc
    _CHILDREN[child.pid] = child
    return child.pid


def process_alive(name: str, pid: int) -> bool:
    """True while `pid` runs and is still the recorded component (not a zombie, not a reused pid)."""
    if pid <= 0:
        return False
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = Path("/proc") / str(pid)
    if not Path("/proc/self").is_dir():
        return True  # no procfs (macOS): the signal check is all there is
    try:
        status = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        command_line = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return status not in ("Z", "X") and _MARKERS[name].encode() in command_line


def _signal(pid: int, signum: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def _wait_gone(pids: Mapping[str, int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(process_alive(name, pid) for name, pid in pids.items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _stop_processes(pids: Mapping[str, int]) -> bool:
    """SIGTERM each live process group, wait up to _STOP_GRACE s, then SIGKILL. True if any was alive."""
    alive = {name: pid for name, pid in pids.items() if process_alive(name, pid)}
    for pid in alive.values():
        _signal(pid, signal.SIGTERM)
    if not _wait_gone(alive, _STOP_GRACE):
        for name, pid in alive.items():
            if process_alive(name, pid):
                _signal(pid, signal.SIGKILL)
        _wait_gone(alive, 5.0)
    for pid in pids.values():
        _reap(pid)
    return bool(alive)


# --- health -----------------------------------------------------------------------------------------


def _get(url: str, timeout: float = 2.0) -> requests.Response | str:
    with requests.Session() as session:
        session.trust_env = False  # never send 127.0.0.1 through an HTTP(S)_PROXY
        try:
            return session.get(url, timeout=timeout)
        except requests.RequestException as exc:
            return f"no answer ({type(exc).__name__})"


def moto_health(moto_port: int) -> tuple[bool, str]:
    answer = _get(f"http://{HOST}:{moto_port}/moto-api/")
    if isinstance(answer, str):
        return False, answer
    return answer.status_code == 200, f"answers (HTTP {answer.status_code})"


def nessie_health(management_port: int) -> tuple[bool, str]:
    answer = _get(f"http://{HOST}:{management_port}/q/health/ready")
    if isinstance(answer, str):
        return False, answer
    try:
        status = str(answer.json().get("status", "?"))
    except ValueError:
        status = "?"
    return answer.status_code == 200 and status == "UP", f"{status} (HTTP {answer.status_code})"


def _log_tail(log: Path, lines: int = 8) -> str:
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\nLast lines of the log:\n  " + "\n  ".join(tail) if tail else ""


def _wait_ready(name: str, pid: int, log: Path, check: Callable[[], tuple[bool, str]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not process_alive(name, pid):
            child = _CHILDREN.get(pid)
            code = f" with exit code {child.returncode}" if child is not None else ""
            raise StackError(f"{LABELS[name]} (pid {pid}) exited during start-up{code}. Log: {log}{_log_tail(log)}")
        ok, detail = check()
        if ok:
            return
        if time.monotonic() >= deadline:
            raise StackError(
                f"{LABELS[name]} (pid {pid}) did not become ready within {timeout:g} s (last check: {detail}). "
                f"Log: {log}{_log_tail(log)}"
            )
        time.sleep(_POLL)


def _create_buckets(config: StackConfig) -> None:
    boto3: Any = import_module("boto3")  # imported here: boto3 is slow to import and untyped
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://{HOST}:{config.moto_port}",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=config.region,
    )
    location = {} if config.region == "us-east-1" else {"LocationConstraint": config.region}
    for bucket in (config.source_bucket, config.lake_bucket):
        try:
            if location:
                s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=location)
            else:
                s3.create_bucket(Bucket=bucket)
        except Exception as exc:
            raise StackError(
                f"{LABELS[MOTO]} answers but creating bucket {bucket!r} failed ({exc}). Log: {config.moto_log}"
            ) from exc


# --- state file -------------------------------------------------------------------------------------


def _read_record(config: StackConfig) -> dict[str, Any] | None:
    try:
        text = config.state_file.read_text()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise ConfigError(
            f"The stack state file {config.state_file} is unreadable ({exc}). Fix: stop any leftover moto/Nessie "
            "processes (ps -ef | grep -e moto.server -e nessie), then delete the file."
        ) from exc
    return record


def _recorded_pids(record: Mapping[str, Any]) -> dict[str, int]:
    pids = {name: record.get(f"{name}_pid") for name in (MOTO, NESSIE)}
    return {name: pid for name, pid in pids.items() if isinstance(pid, int) and pid > 0}


def recorded_processes(config: StackConfig) -> dict[str, int]:
    """The pids `up` recorded, by component (also for a stack whose start-up was interrupted)."""
    record = _read_record(config)
    return {} if record is None else _recorded_pids(record)


def _write_record(config: StackConfig, record: Mapping[str, Any]) -> None:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    partial = config.state_file.with_suffix(".json.tmp")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(config.state_file)


def load_state(config: StackConfig) -> StackState | None:
    """The recorded, fully started stack (its processes may have died since), or None."""
    record = _read_record(config)
    if record is None or not record.get("complete"):
        return None
    try:
        return StackState.from_json(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"The stack state file {config.state_file} is incomplete ({exc!r}). Fix: wap stack down, then wap stack up."
        ) from exc


def ensure_not_running(config: StackConfig) -> None:
    """Raise ConfigError if a recorded stack still has live processes; forget a stale record."""
    record = _read_record(config)
    if record is None:
        return
    pids = _recorded_pids(record)
    alive = {name: pid for name, pid in pids.items() if process_alive(name, pid)}
    if not alive:
        config.state_file.unlink(missing_ok=True)  # stale: its processes are gone
        return
    listed = ", ".join(f"{LABELS[name]} pid {pid}" for name, pid in alive.items())
    if record.get("complete") and len(alive) == len(pids) == 2:
        raise ConfigError(
            f"The local stack is already running ({listed}; state {config.state_file}). Use it: "
            'eval "$(wap stack env)". Or stop it first: wap stack down'
        )
    raise ConfigError(
        f"A local stack recorded in {config.state_file} is half up ({listed} alive). "
        "Fix: wap stack down, then wap stack up"
    )


# --- API --------------------------------------------------------------------------------------------


def _preflight(config: StackConfig) -> Path:
    """Check everything that can be checked before starting a process; return the java for Nessie."""
    ports = {attr: getattr(config, attr) for attr in _PORT_VARIABLES}
    if len(set(ports.values())) != len(ports):
        raise ConfigError(
            f"The stack ports must differ (moto {config.moto_port}, Nessie {config.nessie_port}, "
            f"Nessie management {config.nessie_management_port}). Fix: set "
            + ", ".join(var for var, _ in _PORT_VARIABLES.values())
        )
    for attr, port in ports.items():
        variable, use = _PORT_VARIABLES[attr]
        if not port_is_free(port):
            raise ConfigError(
                f"Port {port} ({use}) is already in use on {HOST}. Fix: stop whatever listens on it "
                f"(another stack: wap stack down), or pick another port: export {variable}=<free port>"
            )
    if not config.nessie_jar.is_file():
        raise ConfigError(
            f"The Nessie server jar {config.nessie_jar} does not exist. Fix: download it into "
            f"{default_nessie_jar().parent} (make jars), or export WAP_NESSIE_JAR=/path/to/"
            f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"
        )
    return find_java(config.nessie_java, os.environ.get("JAVA_HOME"))


def start_stack(config: StackConfig) -> StackState:
    """Start moto (with both buckets) and then Nessie; on any failure stop what was started and raise."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "up.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the file closes
        except BlockingIOError as exc:
            raise ConfigError(
                f"Another `wap stack up` is starting the stack in {config.state_dir}. Wait for it to finish, "
                "or stop it: wap stack down"
            ) from exc
        return _start(config)


def _start(config: StackConfig) -> StackState:
    ensure_not_running(config)
    java = _preflight(config)
    record: dict[str, Any] = {
        "complete": False,
        "state_dir": str(config.state_dir),
        "moto_pid": None,
        "nessie_pid": None,
        "moto_port": config.moto_port,
        "nessie_port": config.nessie_port,
        "nessie_management_port": config.nessie_management_port,
        "source_bucket": config.source_bucket,
        "lake_bucket": config.lake_bucket,
        "region": config.region,
        "moto_log": str(config.moto_log),
        "nessie_log": str(config.nessie_log),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        began = time.monotonic()
        env = {**os.environ, "MOTO_PORT": str(config.moto_port)}
        record["moto_pid"] = _spawn(MOTO, moto_command(config), config.moto_log, env)
        _write_record(config, record)
        _wait_ready(
            MOTO,
            record["moto_pid"],
            config.moto_log,
            lambda: moto_health(config.moto_port),
            config.startup_timeout,
        )
        _create_buckets(config)  # before Nessie: its readiness includes the object store
        record["moto_seconds"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        record["nessie_pid"] = _spawn(NESSIE, nessie_command(config, java), config.nessie_log, os.environ)
        _write_record(config, record)
        _wait_ready(
            NESSIE,
            record["nessie_pid"],
            config.nessie_log,
            lambda: nessie_health(config.nessie_management_port),
            config.startup_timeout,
        )
        record["nessie_seconds"] = round(time.monotonic() - began, 2)
        state = StackState.from_json(record)
        _write_record(config, {"complete": True, **state.to_json()})
    except BaseException:
        _stop_processes(_recorded_pids(record))
        config.state_file.unlink(missing_ok=True)
        raise
    return state


def stop_stack(config: StackConfig) -> bool:
    """Stop the recorded processes (both, always) and forget the stack. True if any process was stopped."""
    record = _read_record(config)
    if record is None:
        return False
    stopped = _stop_processes(_recorded_pids(record))
    config.state_file.unlink(missing_ok=True)
    return stopped


def stack_status(config: StackConfig) -> StackStatus:
    record = _read_record(config)
    if record is None:
        return StackStatus(config.state_file, recorded=False, components=())
    pids = _recorded_pids(record)
    moto_port = int(record.get("moto_port", config.moto_port))
    api_port = int(record.get("nessie_port", config.nessie_port))
    management_port = int(record.get("nessie_management_port", config.nessie_management_port))
    checks: dict[str, tuple[str, str, Callable[[], tuple[bool, str]]]] = {
        MOTO: (f"http://{HOST}:{moto_port}", f"http://{HOST}:{moto_port}/moto-api/", lambda: moto_health(moto_port)),
        NESSIE: (
            f"http://{HOST}:{api_port}",
            f"http://{HOST}:{management_port}/q/health/ready",
            lambda: nessie_health(management_port),
        ),
    }
    components = []
    for name, (url, health_url, check) in checks.items():
        pid = pids.get(name)
        alive = pid is not None and process_alive(name, pid)
        healthy, health = check() if alive else (False, "not running" if pid else "never started")
        log = Path(str(record.get(f"{name}_log", config.logs_dir / f"{name}.log")))
        components.append(ComponentStatus(LABELS[name], pid, alive, url, health_url, healthy, health, log))
    complete = bool(record.get("complete"))
    return StackStatus(config.state_file, recorded=True, components=tuple(components), complete=complete)
