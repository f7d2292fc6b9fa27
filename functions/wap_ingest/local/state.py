"""The stack's settings (`StackConfig`, from WAP_STACK_* variables) and its record (`StackState`).

`up` records pids, ports and buckets in <state_dir>/state.json as soon as a process is started (marked
complete once both are ready), so an interrupted start-up can still be cleaned up; `stack_environment`
turns a recorded stack into the variables that point the service, boto3 and Spark at it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import wap_ingest
from wap_ingest.core.errors import ConfigError
from wap_ingest.local.components import (
    ACCESS_KEY,
    ALERT_CHANNEL,
    COMPONENTS,
    HOST,
    MOTO,
    NESSIE,
    NESSIE_VERSION,
    SECRET_KEY,
    SINK_TOKEN,
)


def repo_root() -> Path:
    return Path(wap_ingest.__file__).resolve().parents[2]


def default_state_dir() -> Path:
    return repo_root() / ".wap" / "stack"


def default_nessie_jar() -> Path:
    return repo_root() / ".cache" / "jars" / "nessie" / f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"


def default_rie() -> Path:
    return repo_root() / ".cache" / "rie" / "aws-lambda-rie"


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
    slack_port: int = 19122
    lambda_port: int = 19123
    runtime_port: int = 19124
    max_receives: int = 3  # the events queue's maxReceiveCount before the dead-letter queue
    rie: Path = field(default_factory=default_rie)

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
            slack_port=_port(env, "WAP_STACK_SLACK_PORT", defaults.slack_port),
            lambda_port=_port(env, "WAP_STACK_LAMBDA_PORT", defaults.lambda_port),
            runtime_port=_port(env, "WAP_STACK_RUNTIME_PORT", defaults.runtime_port),
            rie=_path(env, "WAP_RIE") or defaults.rie,
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

    def log_for(self, component: str) -> Path:
        return self.logs_dir / f"{component}.log"

    @property
    def alerts_file(self) -> Path:
        return self.state_dir / "alerts.jsonl"

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
    slack_pid: int | None = None
    lambda_pid: int | None = None
    worker_pid: int | None = None
    slack_port: int | None = None
    lambda_port: int | None = None
    queue_url: str | None = None
    dead_letter_url: str | None = None
    max_receives: int | None = None
    trigger_seconds: float | None = None

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
    def slack_url(self) -> str | None:
        return f"http://{HOST}:{self.slack_port}/api/" if self.slack_port else None

    @property
    def invoke_url(self) -> str | None:
        if not self.lambda_port:
            return None
        return f"http://{HOST}:{self.lambda_port}/2015-03-31/functions/function/invocations"

    @property
    def pids(self) -> dict[str, int]:
        pids = {MOTO: self.moto_pid, NESSIE: self.nessie_pid}
        extra = {"slack": self.slack_pid, "lambda": self.lambda_pid, "worker": self.worker_pid}
        return pids | {name: pid for name, pid in extra.items() if pid}

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
            slack_pid=_optional_int(data.get("slack_pid")),
            lambda_pid=_optional_int(data.get("lambda_pid")),
            worker_pid=_optional_int(data.get("worker_pid")),
            slack_port=_optional_int(data.get("slack_port")),
            lambda_port=_optional_int(data.get("lambda_port")),
            queue_url=data.get("queue_url"),
            dead_letter_url=data.get("dead_letter_url"),
            max_receives=_optional_int(data.get("max_receives")),
            trigger_seconds=None if data.get("trigger_seconds") is None else float(data["trigger_seconds"]),
        )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def stack_environment(state: StackState) -> dict[str, str]:
    """The variables that point the service, boto3 and Spark at the local stack."""
    env = {
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
    if state.slack_url:
        env |= {"WAP_SLACK_BASE_URL": state.slack_url, "SLACK_TOKEN": SINK_TOKEN, "SLACK_CHANNEL": ALERT_CHANNEL}
    if state.max_receives:
        env["WAP_MAX_RECEIVES"] = str(state.max_receives)
    if state.queue_url and state.dead_letter_url:
        env |= {"WAP_STACK_QUEUE_URL": state.queue_url, "WAP_STACK_DLQ_URL": state.dead_letter_url}
    return env


# --- state file -------------------------------------------------------------------------------------


def read_record(config: StackConfig) -> dict[str, Any] | None:
    """The state file's record as written (complete or not), or None if there is none."""
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


def recorded_pids(record: Mapping[str, Any]) -> dict[str, int]:
    pids = {name: record.get(f"{name}_pid") for name in COMPONENTS}
    return {name: pid for name, pid in pids.items() if isinstance(pid, int) and pid > 0}


def recorded_processes(config: StackConfig) -> dict[str, int]:
    """The pids `up` recorded, by component (also for a stack whose start-up was interrupted)."""
    record = read_record(config)
    return {} if record is None else recorded_pids(record)


def write_record(config: StackConfig, record: Mapping[str, Any]) -> None:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    partial = config.state_file.with_suffix(".json.tmp")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(config.state_file)


def load_state(config: StackConfig) -> StackState | None:
    """The recorded, fully started stack (its processes may have died since), or None."""
    record = read_record(config)
    if record is None or not record.get("complete"):
        return None
    try:
        return StackState.from_json(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"The stack state file {config.state_file} is incomplete ({exc!r}). Fix: wap stack down, then wap stack up."
        ) from exc
