"""Ahead-of-time caches for the stack's two JVM servers (Nessie, the queue server): JDK 25's AOT cache (JEP 483 and
514: the classes a start loads, already parsed and linked) cuts a Nessie start from 5.2 to 2.3 s of CPU and from
6.0 to 2.1 s to its first answer (measured on this project's machines); the suite starts a stack dozens of times.

`make setup` builds them (`python -m wap_stack.aot`): one training start of each server with `-XX:AOTCacheOutput`,
stopped once it answers, the cache written through a temporary file. Each cache is named by a key of what the JVM
checks it against (the java build, every jar of the classpath by path, size and time, the JVM's own flags; not the
`-D` settings, which differ per stack), so a changed java or jar finds no cache and starts as before, never on a stale
one. A java older than 25 gets no cache.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from wap_stack.config import StackConfig, repo_root
from wap_stack.processes import free_ports

AOT_MIN_JAVA = 25
FORMAT = "1"  # part of the key: bump it when the training changes


def cache_dir() -> Path:
    return repo_root() / ".cache" / "jars" / "aot"


def _classpath(command: list[str]) -> list[Path]:
    for flag in ("-jar", "-cp"):
        if flag in command:
            value = command[command.index(flag) + 1]
            return sorted(Path(value[:-1]).glob("*.jar")) if value.endswith("/*") else [Path(value)]
    return []


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def cache_path(name: str, command: list[str]) -> Path | None:
    """Where the cache for this server's command is (or would be); None when a jar or the java is missing."""
    try:
        java = Path(command[0]).resolve()
        release = java.parent.parent / "release"
        parts = [FORMAT, _stamp(java), release.read_text() if release.is_file() else ""]
        parts += [a for a in command[1:] if a.startswith("-X")]
        parts += [_stamp(jar) for jar in _classpath(command)]
    except OSError:
        return None
    return cache_dir() / f"{name}-{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:24]}.aot"


def with_cache(name: str, command: list[str]) -> list[str]:
    """`command` with its AOT cache when one is built for it (else unchanged: the server starts as without)."""
    path = cache_path(name, command)
    return [command[0], f"-XX:AOTCache={path}", *command[1:]] if path is not None and path.is_file() else command


def train(name: str, command: list[str], ready: Callable[[], tuple[bool, str]], log: Path) -> Path | None:
    """Start the server once with -XX:AOTCacheOutput, stop it once `ready`, keep the cache it writes at exit."""
    from wap_stack.java import java_major

    target = cache_path(name, command)
    if target is None or target.is_file():
        return target
    major = java_major(Path(command[0]))
    if major is None or major < AOT_MIN_JAVA:
        print(f"aot: {name}: java {major} has no AOT cache (JDK {AOT_MIN_JAVA}+): it starts without one")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.tmp")
    began = time.monotonic()
    with log.open("wb") as out:
        server = subprocess.Popen([command[0], f"-XX:AOTCacheOutput={partial}", *command[1:]], stdout=out,
                                  stderr=subprocess.STDOUT)
        try:
            while not ready()[0]:
                if server.poll() is not None or time.monotonic() - began > 180:
                    raise RuntimeError(f"aot: {name} did not start for its training run; see {log}")
                time.sleep(0.2)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)
    if not partial.is_file():
        raise RuntimeError(f"aot: {name} wrote no cache at exit; see {log}")
    partial.replace(target)
    for stale in target.parent.glob(f"{name}-*.aot"):  # built for a java or jars no longer there
        if stale != target:
            stale.unlink(missing_ok=True)
    print(f"aot: {name} cache built in {time.monotonic() - began:.0f}s: {target}")
    return target


def main() -> int:
    from wap_stack import queue
    from wap_stack.java import find_java
    from wap_stack.nessie import nessie_command
    from wap_stack.status import nessie_health

    with tempfile.TemporaryDirectory(prefix="wap-aot-") as folder:
        moto, nessie, management, queue_port = free_ports(4)
        config = StackConfig(state_dir=Path(folder), moto_port=moto, nessie_port=nessie,
                             nessie_management_port=management, queue_port=queue_port)
        java = find_java(config.nessie_java, os.environ.get("JAVA_HOME"))
        # the live check (not ready: readiness asks for the object store, which a training run has not)
        train("nessie", nessie_command(config, java, cached=False), lambda: nessie_health(management, "live"),
              Path(folder) / "nessie.log")
        queue.write_settings(config)
        train("queue", queue.queue_command(config, java, cached=False), lambda: queue.health(queue_port),
              Path(folder) / "queue.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
