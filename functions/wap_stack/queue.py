"""The stack's queue server: ElasticMQ (a real SQS-compatible server, its jars pinned in docker/pom.xml's `elasticmq`
profile, fetched by `make jars` into .cache/jars/elasticmq and checked against docker/jars.sha256), serving the events
queue and its dead-letter queue behind moto's endpoint (wap_stack/moto_queue.py says why and how).

Its receive does not cost more the deeper the queue, so a burst of files reaches the function as fast as it takes
them. Its messages and queues are kept on disk (H2, in <state_dir>/queue-store), so a queue server that crashed comes
back with every message it held (the stack's keeper, wap_stack/heal.py); like Nessie's store, `up` starts it empty and
`down` deletes it, with the lake.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from wap_stack import aot
from wap_stack.components import DEAD_LETTER_QUEUE, EVENTS_QUEUE, HOST, QUEUE
from wap_stack.config import StackConfig, repo_root
from wap_stack.environment import system_environment
from wap_stack.processes import spawn, wait_ready

ACCOUNT = "123456789012"  # moto's default account: the queues' URLs and ARNs are the ones moto would give
ROUTED_QUEUES = (EVENTS_QUEUE, DEAD_LETTER_QUEUE)
MAIN_CLASS = "org.elasticmq.server.Main"


def default_jars() -> Path:
    return repo_root() / ".cache" / "jars" / "elasticmq"


def store(config: StackConfig) -> Path:
    return config.state_dir / "queue-store"


def settings_file(config: StackConfig) -> Path:
    return config.state_dir / "elasticmq.conf"


def endpoint(config: StackConfig) -> str:
    return f"http://{HOST}:{config.queue_port}"


def write_settings(config: StackConfig) -> Path:
    """ElasticMQ's configuration (HOCON): loopback only, moto's address as the queues' address, the store on disk."""
    folder = store(config)
    folder.mkdir(parents=True, exist_ok=True)
    text = f"""include classpath("application.conf")
node-address {{ protocol = http, host = "{HOST}", port = {config.moto_port}, context-path = "" }}
rest-sqs {{ enabled = true, bind-port = {config.queue_port}, bind-hostname = "{HOST}", sqs-limits = strict }}
rest-stats {{ enabled = false }}
aws {{ region = "{config.region}", accountId = "{ACCOUNT}" }}
messages-storage {{ enabled = true, uri = "jdbc:h2:{folder / 'messages'}" }}
queues-storage {{ enabled = true, path = "{folder / 'queues.conf'}" }}
"""
    path = settings_file(config)
    path.write_text(text)
    return path


def queue_command(config: StackConfig, java: Path, jars: Path | None = None, *, cached: bool = True) -> list[str]:
    jars = jars or default_jars()
    # C1 only and the serial GC, as for Nessie: it starts in about 2 s and needs little.
    command = [str(java), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               f"-Dconfig.file={settings_file(config)}", "-cp", f"{jars}/*", MAIN_CLASS]
    return aot.with_cache(QUEUE, command) if cached else command  # `make setup` builds the cache (wap_stack/aot.py)


def reset_store(config: StackConfig) -> None:
    """Delete the queue server's store (only ever while no queue server of this stack runs)."""
    shutil.rmtree(store(config), ignore_errors=True)


def launch(config: StackConfig, command: list[str], *, append: bool = False) -> int:
    return spawn(QUEUE, command, config.log_for(QUEUE), system_environment(), append=append)


def health(port: int) -> tuple[bool, str]:
    import requests

    with requests.Session() as session:
        session.trust_env = False
        try:
            answer = session.get(f"http://{HOST}:{port}/?Action=ListQueues", timeout=2)
        except requests.RequestException as exc:
            return False, f"no answer ({type(exc).__name__})"
    return answer.status_code == 200, f"answers (HTTP {answer.status_code})"


def wait_until_ready(config: StackConfig, pid: int) -> None:
    wait_ready(QUEUE, pid, config.log_for(QUEUE), lambda: health(config.queue_port), config.startup_timeout)


def missing_jars(jars: Path | None = None) -> bool:
    folder = jars or default_jars()
    return not any(folder.glob("elasticmq-server_*.jar"))
