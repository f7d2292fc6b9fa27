"""`wap stack status`: the components' health checks, the queue's messages in flight, and the report on a recorded
stack."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from wap_stack.components import ACCESS_KEY, HELD, HOST, KEEPER, MOTO, NESSIE, QUEUE, SECRET_KEY, SLACK, label
from wap_stack.config import StackConfig
from wap_stack.iam import ADMIN, principal_environment
from wap_stack.processes import port_open, process_alive
from wap_stack.queue import health as queue_health
from wap_stack.runtime import RESTARTS, restart_summary
from wap_stack.state import invoke_url, read_in_flight, read_record, recorded_pids


def _get(url: str, timeout: float = 2.0) -> requests.Response | str:
    with requests.Session() as session:
        session.trust_env = False  # never send 127.0.0.1 through an HTTP(S)_PROXY
        try:
            return session.get(url, timeout=timeout)
        except requests.RequestException as exc:
            return f"no answer ({type(exc).__name__})"


def sink_health(port: int) -> tuple[bool, str]:
    answer = _get(f"http://{HOST}:{port}/health")
    if isinstance(answer, str):
        return False, answer
    return answer.status_code == 200, f"answers (HTTP {answer.status_code})"


def moto_health(moto_port: int) -> tuple[bool, str]:
    answer = _get(f"http://{HOST}:{moto_port}/moto-api/")
    if isinstance(answer, str):
        return False, answer
    return answer.status_code == 200, f"answers (HTTP {answer.status_code})"


def nessie_health(management_port: int, probe: str = "ready") -> tuple[bool, str]:
    """Quarkus's health probe: `ready` (the catalog and its object store answer) or `live` (the server runs)."""
    answer = _get(f"http://{HOST}:{management_port}/q/health/{probe}")
    if isinstance(answer, str):
        return False, answer
    try:
        status = str(answer.json().get("status", "?"))
    except ValueError:
        status = "?"
    return answer.status_code == 200 and status == "UP", f"{status} (HTTP {answer.status_code})"


def _listening_check(port: int) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        listening = port_open(port)
        return listening, "invoke API listening" if listening else "invoke API not listening"

    return check


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
    process: str  # its name in the record and its log: moto, nessie, slack, lambda, worker, lambda-2, ...


@dataclass(frozen=True)
class InFlight:
    """The events queue's messages: waiting, received and not yet deleted (in flight), and the batches the workers
    noted: the one each is handling and those that crashed, whose messages come back at `back_at` (Unix time)."""

    visibility_seconds: int | None
    waiting: int | None  # None: the queue could not be asked
    in_flight: int | None
    batches: tuple[dict[str, Any], ...] = ()
    error: str = ""

    def lines(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        if self.waiting is None:
            counts = f"the queue could not be asked ({self.error})"
        else:
            counts = f"{self.waiting} waiting, {self.in_flight} in flight (received, not yet deleted)"
        lines = [f"{counts}; a crashed batch's messages come back after {self.visibility_seconds} s"]
        for batch in self.batches:
            back = datetime.fromtimestamp(batch["back_at"]).strftime("%H:%M:%S")
            wait = max(0, round(batch["back_at"] - now))
            what = ("crashed" + (f" ({batch['crash']})" if batch.get("crash") else "") if batch["state"] == "crashed"
                    else "being handled")
            lines.append(f"{batch['environment']}: a batch of {batch['messages']} message(s) {what}; if not deleted, "
                         f"they come back at {back} (in {wait} s)")
        return lines


def in_flight(record: Mapping[str, Any], state_dir: Path) -> InFlight | None:
    """What the queue and the workers say about the stack's messages; None for a stack without an event path."""
    queue_url = record.get("queue_url")
    if not queue_url:
        return None
    batches = tuple({**batch, "environment": name} for name, noted in read_in_flight(state_dir).items()
                    for batch in noted if batch.get("back_at", 0) > time.time() or batch.get("state") == "running")
    visibility = record.get("visibility_seconds")
    try:
        import boto3  # imported here: slow to import, and only needed for a stack with an event path

        keys = principal_environment(state_dir, ADMIN)  # with --iam; else moto's open door
        sqs = boto3.client("sqs", endpoint_url=f"http://{HOST}:{record['moto_port']}", region_name=record["region"],
                           aws_access_key_id=keys.get("AWS_ACCESS_KEY_ID", ACCESS_KEY),
                           aws_secret_access_key=keys.get("AWS_SECRET_ACCESS_KEY", SECRET_KEY))
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
    except Exception as exc:  # moto is down or refuses: the rest of the status still stands
        return InFlight(visibility, None, None, batches, error=f"{type(exc).__name__}: {exc}")
    return InFlight(visibility, int(attributes["ApproximateNumberOfMessages"]),
                    int(attributes["ApproximateNumberOfMessagesNotVisible"]), batches)


@dataclass(frozen=True)
class StackStatus:
    state_file: Path
    recorded: bool
    components: tuple[ComponentStatus, ...]
    complete: bool = True  # False: the `up` that recorded it did not finish
    messages: InFlight | None = field(default=None)

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
        if self.broken and not any(c.alive for c in self.components if c.process == MOTO):
            return (
                f"The local stack is BROKEN: {dead} is not running while the others are; without moto the object "
                "store it held in memory is gone, and the catalog must not outlive it. Fix: wap stack down, then "
                "wap stack up"
            )
        if self.broken:
            return (
                f"The local stack is BROKEN: {dead} is not running while the others are. The lake is intact (moto "
                "runs): the stack's keeper starts a crashed part again on its store within seconds, and so does "
                "`wap stack up`. If it cannot (see the health and the log above): wap stack down, then wap stack up"
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
            "messages": None if self.messages is None else asdict(self.messages),
        }


def stack_status(config: StackConfig) -> StackStatus:
    record = read_record(config)
    if record is None:
        return StackStatus(config.state_file, recorded=False, components=())
    pids = recorded_pids(record)
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
    if record.get("queue_port") and pids.get(QUEUE):
        queue_port = int(record["queue_port"])
        checks[QUEUE] = (f"http://{HOST}:{queue_port}", f"http://{HOST}:{queue_port}/?Action=ListQueues",
                         lambda: queue_health(queue_port))
    if record.get("slack_port"):
        slack_port = int(record["slack_port"])
        checks[SLACK] = (f"http://{HOST}:{slack_port}/api/", f"http://{HOST}:{slack_port}/health",
                         lambda: sink_health(slack_port))
    for env in record.get("environments") or ():
        invoke = invoke_url(int(env["invoke_port"]))
        checks[str(env["lambda"])] = (invoke, invoke, _listening_check(int(env["invoke_port"])))
        checks[str(env["worker"])] = (str(record.get("queue_url", "")), "-", lambda: (True, "polling"))
    if pids.get(KEEPER):
        checks[KEEPER] = ("-", "-", lambda: (True, "watching the parts"))
    components = []
    for name, (url, health_url, check) in checks.items():
        pid = pids.get(name)
        alive = pid is not None and process_alive(name, pid)
        healthy, health = check() if alive else (False, "not running" if pid else "never started")
        restarted = restart_summary(name, record.get(RESTARTS) or {})  # a crashed execution environment, replaced
        if restarted:
            health = f"{health}; {restarted}"
        log = Path(str(record.get(f"{name}_log", config.logs_dir / f"{name}.log")))
        components.append(ComponentStatus(label(name), pid, alive, url, health_url, healthy, health, log, name))
    complete = bool(record.get("complete"))
    held = set(record.get(HELD) or ())
    components = [replace(c, health=f"{c.health}; stopped on purpose (start_nessie starts it again)")
                  if c.process in held and not c.alive else c for c in components]
    moto_alive = any(c.process == MOTO and c.alive for c in components)
    messages = in_flight(record, config.state_dir) if moto_alive else None
    return StackStatus(config.state_file, recorded=True, components=tuple(components), complete=complete,
                       messages=messages)
