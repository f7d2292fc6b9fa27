"""Peak memory of a process tree: a command run as a child while its resident set, summed over the child and
all its descendants (the JVM a PySpark driver starts, the Python a spark-submit starts), is sampled from /proc.

`ru_maxrss` does not answer this: it is the largest single process, not the sum of the tree; a JVM that
PySpark leaves to exit on its own is never waited for by the child, so its rusage is lost; and Linux carries a
process's high-water mark across fork and exec, so a child started by a 250 MB parent reports at least that.
Resident pages shared by two processes of the tree (libc, the JDK's libraries) are counted twice: a small
overstatement. A peak shorter than the sampling interval can be missed. Linux only (/proc).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Measured:
    returncode: int
    wall_s: float
    peak_tree_bytes: int  # sampled: the largest sum of RSS over the child and its descendants
    samples: int
    stdout: str
    stderr: str

    @property
    def peak_tree_mib(self) -> float:
        return round(self.peak_tree_bytes / 2**20, 1)


def _parents() -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])  # the name may hold spaces and ')'
    return found


def tree_of(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def resident_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):  # exited between the listing and the read
        return 0


def tree_resident_bytes(root: int) -> int:
    return sum(resident_bytes(pid) for pid in tree_of(root))


def run_measured(
    command: Sequence[str], env: Mapping[str, str], *, cwd: Path | None = None, interval: float = 0.1,
    timeout: float = 3600,
) -> Measured:
    """Run `command` to its end, sampling its tree's resident memory every `interval` seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=out, stderr=err)
        peak, samples = 0, 0
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, tree_resident_bytes(proc.pid))
            samples += 1
            if time.perf_counter() - started > timeout:
                proc.kill()
                pid, status = os.waitpid(proc.pid, 0)
                break
            time.sleep(interval)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        return Measured(proc.returncode, wall, peak, samples,
                        out.read().decode(errors="replace"), err.read().decode(errors="replace"))
