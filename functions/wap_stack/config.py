"""The stack's settings: `StackConfig`, read from WAP_STACK_* variables (`StackConfig.from_env`).

Ports: moto, Nessie (API and management), the Slack sink, and for each of the `workers` Lambda execution
environments an invoke port and a runtime API port. Environment i (0-based) uses WAP_STACK_LAMBDA_PORT + 2i
and WAP_STACK_RUNTIME_PORT + 2i, so the defaults (19123, 19124) give one contiguous block 19123..19122+2N.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

import wap_ingest
from wap_ingest.core.errors import ConfigError
from wap_stack.components import NESSIE_VERSION

MAX_WORKERS = 16
DEFAULT_VISIBILITY_SECONDS = 1200
ABANDONED_VARIABLE = "WAP_ABANDONED_BRANCH_SECONDS"
ABANDONED_DEFAULT = 960.0  # as wap_ingest.bootstrap.config reads it
VISIBILITY_VARIABLE = "WAP_STACK_VISIBILITY_SECONDS"
MAX_VISIBILITY_SECONDS = 43_200  # SQS's limit


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
    queue_port: int = 0  # the queue server (ElasticMQ), behind moto's endpoint; 0: a free port picked at `up`
    lambda_port: int = 19123  # the first execution environment's invoke API; the n-th: + 2(n-1)
    runtime_port: int = 19124  # the first execution environment's runtime API; the n-th: + 2(n-1)
    max_receives: int = 3  # the events queue's maxReceiveCount before the dead-letter queue
    rie: Path = field(default_factory=default_rie)
    workers: int = 1  # Lambda execution environments: pairs of (runtime under the emulator, SQS worker)
    # How long a received message stays invisible (the worker's receive, like the queue's timeout in AWS, 5,400 s):
    # what a crashed invocation's messages wait before they come back. Above WAP_ABANDONED_BRANCH_SECONDS (960 s by
    # default), so that the dead run's batch branch is "abandoned" by then and the redelivered run deletes it.
    visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS
    # The EMR Serverless application is always registered on moto (submissions are recorded); "local" also runs
    # each submitted job with spark-submit against the stack (WAP_EMR_MODE=local).
    emr_mode: str = "record"
    # Nessie with authentication and the catalog's authorization rules, tokens from a local OIDC issuer
    # (`wap stack up --auth`, or WAP_STACK_AUTH=1; see wap_stack/auth.py).
    auth: bool = False
    # The function from this Lambda image (podman, wap_stack/image.py) instead of awslambdaric on the host
    # (`wap stack up --image [NAME]`, or WAP_STACK_IMAGE=NAME); None: on the host.
    image: str | None = None
    # IAM enforced by moto, each process with its principal's policy (`wap stack up --iam`, or WAP_STACK_IAM=1;
    # see wap_stack/iam.py).
    iam: bool = False

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
            queue_port=_port(env, "WAP_STACK_QUEUE_PORT", defaults.queue_port),
            lambda_port=_port(env, "WAP_STACK_LAMBDA_PORT", defaults.lambda_port),
            runtime_port=_port(env, "WAP_STACK_RUNTIME_PORT", defaults.runtime_port),
            rie=_path(env, "WAP_RIE") or defaults.rie,
            workers=_count(env, "WAP_STACK_WORKERS", defaults.workers),
            visibility_seconds=_visibility(env, defaults.visibility_seconds),
            emr_mode=_emr_mode(env),
            auth=env.get("WAP_STACK_AUTH", "").strip().lower() in ("1", "true", "yes"),
            image=env.get("WAP_STACK_IMAGE", "").strip() or None,
            iam=env.get("WAP_STACK_IAM", "").strip().lower() in ("1", "true", "yes"),
        )

    def environment_ports(self) -> list[tuple[int, int]]:
        """(invoke port, runtime API port) of each Lambda execution environment, the first one first."""
        return [(self.lambda_port + 2 * i, self.runtime_port + 2 * i) for i in range(self.workers)]

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def stopping_file(self) -> Path:
        """Present while `wap stack down` runs: a worker's supervisor restarts no execution environment then."""
        return self.state_dir / "stopping"

    @property
    def nessie_store(self) -> Path:
        """Nessie's RocksDB version store: created by `up`, deleted by `down` (it lives as long as moto's S3)."""
        return self.state_dir / "nessie-store"

    @property
    def moto_log(self) -> Path:
        return self.logs_dir / "moto.log"

    def log_for(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    @property
    def alerts_file(self) -> Path:
        return self.state_dir / "alerts.jsonl"

    @property
    def nessie_log(self) -> Path:
        return self.logs_dir / "nessie.log"


EMR_MODES = ("record", "local")


def _emr_mode(env: Mapping[str, str]) -> str:
    value = env.get("WAP_EMR_MODE", "").strip() or "record"
    if value not in EMR_MODES:
        raise ConfigError(f"WAP_EMR_MODE={value!r}: use `local` (run submitted jobs with spark-submit) or `record`.")
    return value


def _visibility(env: Mapping[str, str], default: int) -> int:
    value = env.get(VISIBILITY_VARIABLE, "").strip()
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_VISIBILITY_SECONDS:
        raise ConfigError(f"{VISIBILITY_VARIABLE}={value!r} is not a number of seconds from 1 to "
                          f"{MAX_VISIBILITY_SECONDS} (SQS's limit). Fix: export {VISIBILITY_VARIABLE}=1200, "
                          "or unset it.")
    return int(value)


def abandoned_branch_seconds(env: Mapping[str, str]) -> float:
    """WAP_ABANDONED_BRANCH_SECONDS as the stack's function will read it (it inherits the stack's environment)."""
    value = env.get(ABANDONED_VARIABLE, "").strip()
    try:
        return float(value) if value else ABANDONED_DEFAULT
    except ValueError as exc:
        raise ConfigError(f"{ABANDONED_VARIABLE}={value!r} is not a number of seconds. Fix: export "
                          f"{ABANDONED_VARIABLE}=960, or unset it.") from exc


def check_visibility(visibility_seconds: int, env: Mapping[str, str]) -> None:
    """The worker's visibility timeout must exceed WAP_ABANDONED_BRANCH_SECONDS, as the queue's 5,400 s does in AWS:
    a crashed run's messages come back only once its batch branch counts as abandoned, so the run they start deletes
    it (with a shorter timeout the branch, younger than the threshold, stays behind)."""
    abandoned = abandoned_branch_seconds(env)
    if visibility_seconds <= abandoned:
        raise ConfigError(
            f"The stack's visibility timeout ({VISIBILITY_VARIABLE}={visibility_seconds}) must be above "
            f"{ABANDONED_VARIABLE} ({abandoned:g} s): a crashed run's messages would come back before its batch branch "
            f"counts as abandoned, and that branch would stay behind. Fix: export "
            f"{VISIBILITY_VARIABLE}={int(abandoned) + 240} (or lower {ABANDONED_VARIABLE})."
        )


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


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
        raise ConfigError(
            f"{name}={value!r} is not a number from 1 to {MAX_WORKERS}. Fix: export {name}=2, or unset it."
        )
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


_PATHS = ("state_dir", "nessie_jar", "nessie_java", "rie")


def config_to_json(config: StackConfig) -> dict[str, object]:
    """The settings a stack was started with, for its record: whoever restarts a part of it (the keeper, a later
    `wap stack up`) starts it exactly as `up` did (wap_stack/heal.py)."""
    return {f.name: (None if value is None else str(value)) if f.name in _PATHS else value
            for f in fields(config) for value in [getattr(config, f.name)]}


def config_from_json(data: Mapping[str, object]) -> StackConfig:
    known = {f.name for f in fields(StackConfig)}
    values = {name: (None if value is None else Path(str(value))) if name in _PATHS else value
              for name, value in data.items() if name in known}
    return StackConfig(**values)  # type: ignore[arg-type]
