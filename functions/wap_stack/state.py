"""The stack's record (`StackState`, in <state_dir>/state.json) and the variables that point at it.

`up` records pids, ports and buckets in <state_dir>/state.json as soon as a process is started (marked
complete once all are ready), so an interrupted start-up can still be cleaned up. Every process's pid is
recorded as `<name>_pid` (`moto_pid`, `lambda-2_pid`, ...: see `components.process_name`), so `down` stops
whatever a record names. `stack_environment` turns a recorded stack into the variables that point the
service, boto3 and Spark at it. The settings (`StackConfig`) are in `config`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import ConfigError
from wap_ingest.core.publish_requests import PRINCIPALS_VARIABLE
from wap_stack.auth import role_environment
from wap_stack.aws_roles import publish_principals
from wap_stack.components import (
    ACCESS_KEY,
    ALERT_CHANNEL,
    COMPONENTS,
    EMR,
    HOST,
    KEEPER,
    LAMBDA,
    MOTO,
    NESSIE,
    QUEUE,
    SECRET_KEY,
    SINK_TOKEN,
    SLACK,
    WORKER,
    component_of,
    process_name,
)
from wap_stack.config import StackConfig
from wap_stack.iam import ADMIN, iam_enabled, principal_environment
from wap_stack.iam import OPERATOR as IAM_OPERATOR
from wap_stack.iam import user_for as iam_user_for
from wap_stack.slack_workspace import LOCAL_OPERATORS, SIGNING_SECRET_PARAMETER


def invoke_url(port: int) -> str:
    return f"http://{HOST}:{port}/2015-03-31/functions/function/invocations"


@dataclass(frozen=True)
class LambdaEnvironment:
    """One Lambda execution environment: the function's runtime under the emulator, which serves one invocation
    at a time as an execution environment does in AWS, and the SQS worker that polls the events queue for it."""

    number: int  # 1-based: its processes are `lambda`/`worker` for the first, `lambda-<n>`/`worker-<n>` after
    invoke_port: int
    runtime_port: int
    lambda_pid: int
    worker_pid: int

    @property
    def lambda_name(self) -> str:
        return process_name(LAMBDA, self.number)

    @property
    def worker_name(self) -> str:
        return process_name(WORKER, self.number)

    @property
    def invoke_url(self) -> str:
        return invoke_url(self.invoke_port)

    def layout(self) -> dict[str, Any]:
        return environment_layout(self.number, self.invoke_port, self.runtime_port)


def environment_layout(number: int, invoke_port: int, runtime_port: int) -> dict[str, Any]:
    """An execution environment's entry in the record's `environments` (its pids are recorded as `<name>_pid`)."""
    return {"number": number, "invoke_port": invoke_port, "runtime_port": runtime_port,
            "lambda": process_name(LAMBDA, number), "worker": process_name(WORKER, number)}


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
    slack_port: int | None = None
    queue_url: str | None = None
    dead_letter_url: str | None = None
    event_bus: str | None = None  # the bus the function sends downstream events to
    downstream_queue_url: str | None = None  # where a rule on that bus delivers them, for anyone to watch
    max_receives: int | None = None
    trigger_seconds: float | None = None
    environments: tuple[LambdaEnvironment, ...] = ()
    nessie_command: tuple[str, ...] = ()  # how Nessie was started (`start_nessie` starts it again the same way)
    emr_application_id: str | None = None  # registered on moto
    emr_role_arn: str | None = None
    emr_pid: int | None = None  # the local runner, with WAP_EMR_MODE=local
    visibility_seconds: int | None = None  # what a received message stays invisible: a crashed batch's wait
    queue_pid: int | None = None  # the queue server (ElasticMQ) behind moto's endpoint
    queue_port: int | None = None
    keeper_pid: int | None = None  # restarts a crashed part (wap_stack/keeper.py)

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
    def lambda_port(self) -> int | None:
        """The first execution environment's invoke port."""
        return self.environments[0].invoke_port if self.environments else None

    @property
    def invoke_url(self) -> str | None:
        """The first execution environment's invoke URL."""
        return self.environments[0].invoke_url if self.environments else None

    @property
    def lambda_pid(self) -> int | None:
        return self.environments[0].lambda_pid if self.environments else None

    @property
    def worker_pid(self) -> int | None:
        return self.environments[0].worker_pid if self.environments else None

    @property
    def workers(self) -> int:
        return len(self.environments)

    @property
    def pids(self) -> dict[str, int]:
        """Every process of the stack by name: moto, nessie, slack, lambda, worker, lambda-2, worker-2, ..."""
        pids = {MOTO: self.moto_pid, NESSIE: self.nessie_pid} | ({QUEUE: self.queue_pid} if self.queue_pid else {})
        pids |= {SLACK: self.slack_pid} if self.slack_pid else {}
        for env in self.environments:
            pids |= {env.lambda_name: env.lambda_pid, env.worker_name: env.worker_pid}
        return pids | ({EMR: self.emr_pid} if self.emr_pid else {}) | ({KEEPER: self.keeper_pid} if self.keeper_pid
                                                                        else {})

    def to_json(self) -> dict[str, Any]:
        """The record: scalar settings, `<name>_pid` for every process, the environments' layout."""
        data: dict[str, Any] = {
            "state_dir": str(self.state_dir),
            **{f"{name}_pid": pid for name, pid in self.pids.items()},
            "moto_port": self.moto_port,
            "nessie_port": self.nessie_port,
            "nessie_management_port": self.nessie_management_port,
            "source_bucket": self.source_bucket,
            "lake_bucket": self.lake_bucket,
            "region": self.region,
            "moto_log": str(self.moto_log),
            "nessie_log": str(self.nessie_log),
            "started_at": self.started_at,
            "moto_seconds": self.moto_seconds,
            "nessie_seconds": self.nessie_seconds,
            "slack_port": self.slack_port,
            "lambda_port": self.lambda_port,
            "queue_url": self.queue_url,
            "dead_letter_url": self.dead_letter_url,
            "event_bus": self.event_bus,
            "downstream_queue_url": self.downstream_queue_url,
            "max_receives": self.max_receives,
            "trigger_seconds": self.trigger_seconds,
            "workers": self.workers,
            "environments": [env.layout() for env in self.environments],
            "nessie_command": list(self.nessie_command),
            "emr_application_id": self.emr_application_id,
            "emr_role_arn": self.emr_role_arn,
            "visibility_seconds": self.visibility_seconds,
            "queue_port": self.queue_port,
        }
        return {**data, "moto_url": self.moto_url, "nessie_url": self.nessie_url}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StackState:
        environments = tuple(
            LambdaEnvironment(
                number=int(env["number"]),
                invoke_port=int(env["invoke_port"]),
                runtime_port=int(env["runtime_port"]),
                lambda_pid=int(data[f"{env['lambda']}_pid"]),
                worker_pid=int(data[f"{env['worker']}_pid"]),
            )
            for env in data.get("environments") or ()
        )
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
            slack_port=_optional_int(data.get("slack_port")),
            queue_url=data.get("queue_url"),
            dead_letter_url=data.get("dead_letter_url"),
            event_bus=data.get("event_bus"),
            downstream_queue_url=data.get("downstream_queue_url"),
            max_receives=_optional_int(data.get("max_receives")),
            trigger_seconds=None if data.get("trigger_seconds") is None else float(data["trigger_seconds"]),
            environments=environments,
            nessie_command=tuple(str(arg) for arg in data.get("nessie_command") or ()),
            emr_application_id=data.get("emr_application_id"),
            emr_role_arn=data.get("emr_role_arn"),
            emr_pid=_optional_int(data.get("emr_pid")),
            visibility_seconds=_optional_int(data.get("visibility_seconds")),
            queue_pid=_optional_int(data.get("queue_pid")),
            queue_port=_optional_int(data.get("queue_port")),
            keeper_pid=_optional_int(data.get("keeper_pid")),
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
        # the function serves the operator role's publish requests (and the operator user's, with --iam)
        PRINCIPALS_VARIABLE: publish_principals(iam_user_for(IAM_OPERATOR) if iam_enabled(state.state_dir) else None),
    }
    if state.slack_url:
        env |= {"WAP_SLACK_BASE_URL": state.slack_url, "SLACK_TOKEN": SINK_TOKEN, "SLACK_CHANNEL": ALERT_CHANNEL,
                # acting on alerts from the channel page: the local app's secret (in moto's SSM), who may act
                "WAP_SLACK_SIGNING_SECRET_PARAMETER": SIGNING_SECRET_PARAMETER, "WAP_SLACK_OPERATORS": LOCAL_OPERATORS}
    if state.max_receives:
        env["WAP_MAX_RECEIVES"] = str(state.max_receives)
    if state.queue_url and state.dead_letter_url:
        env |= {"WAP_STACK_QUEUE_URL": state.queue_url, "WAP_STACK_DLQ_URL": state.dead_letter_url,
                "WAP_QUEUE_URL": state.queue_url}  # the ingest queue as the function knows it (Slack actions, redrive)
    if state.event_bus and state.downstream_queue_url:
        env |= {"WAP_EVENT_BUS": state.event_bus, "WAP_STACK_DOWNSTREAM_QUEUE_URL": state.downstream_queue_url}
    if state.emr_application_id and state.emr_role_arn:
        env |= {"WAP_EMR_APPLICATION_ID": state.emr_application_id, "WAP_EMR_EXECUTION_ROLE_ARN": state.emr_role_arn}
    # with --auth: the service role's client; with --iam: the admin user's keys (the function gets its own)
    return env | role_environment(state.state_dir) | principal_environment(state.state_dir, ADMIN)


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
    """Every `<name>_pid` of a record whose name is one of the stack's processes, in the order recorded."""
    pids: dict[str, int] = {}
    for key, pid in record.items():
        name = key.removesuffix("_pid")
        if key.endswith("_pid") and component_of(name) in COMPONENTS and type(pid) is int and pid > 0:
            pids[name] = pid
    return pids


def recorded_processes(config: StackConfig) -> dict[str, int]:
    """The pids `up` recorded, by component (also for a stack whose start-up was interrupted)."""
    record = read_record(config)
    return {} if record is None else recorded_pids(record)


@contextlib.contextmanager
def start_lock(config: StackConfig) -> Iterator[None]:
    """Held while starting processes (`up`, `start_nessie`): one at a time per state folder."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "up.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the file closes
        except BlockingIOError as exc:
            raise ConfigError(
                f"Another `wap stack up` (or Nessie start) is starting processes in {config.state_dir}. Wait for it "
                "to finish, or stop it: wap stack down"
            ) from exc
        yield


def in_flight_file(state_dir: Path, environment: str) -> Path:
    """Where the worker of `environment` notes the batch it handles, and a crashed batch until it comes back."""
    return state_dir / "in-flight" / f"{environment}.json"


def write_in_flight(state_dir: Path, environment: str, batches: list[dict[str, Any]]) -> None:
    path = in_flight_file(state_dir, environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps({"environment": environment, "batches": batches}) + "\n")
    partial.replace(path)


def read_in_flight(state_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The batches each environment's worker noted: {environment: [{"messages", "received_at", "back_at",
    "state": "running" | "crashed"}]} (times as Unix seconds)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((state_dir / "in-flight").glob("*.json")):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found[str(document.get("environment", path.stem))] = list(document.get("batches") or [])
    return found


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
