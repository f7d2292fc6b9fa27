"""Run the real pipeline for one object, or a batch of objects, in this process, and stop dead at a chosen step
so the test can SIGKILL the process there (a real kill: nothing in the product's code path knows about it).

    python -m tests.integration.crash_harness STEP MARKER_FILE BUCKET KEY [KEY ...]

STEP: after_branch | after_append | after_audit | after_merge, optionally suffixed `:N` to stop at the N-th
time the step is reached (1 by default). At the step the process writes MARKER_FILE and sleeps until killed. A key
under `_loads/` is a multi-table load's manifest: its files are appended one by one (`after_append:1` stops after
the first).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wap_ingest.bootstrap import build_service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import SourceObject


def stop_here(marker: Path) -> None:
    marker.write_text("reached")
    while True:
        time.sleep(60)


def after(call: Callable[..., Any], marker: Path, nth: int = 1) -> Callable[..., Any]:
    seen = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        seen[0] += 1
        if seen[0] == nth:
            stop_here(marker)
        return result

    return wrapped


def before(call: Callable[..., Any], marker: Path, nth: int = 1) -> Callable[..., Any]:
    seen = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == nth:
            stop_here(marker)
        return call(*args, **kwargs)

    return wrapped


def main(where: str, marker_file: str, bucket: str, *keys: str) -> int:
    marker = Path(marker_file)
    step, _, n = where.partition(":")
    nth = int(n or 1)
    service = build_service(Settings.from_env())
    catalog, writer = service.ports.catalog, service.ports.writer
    if step == "after_branch":
        catalog.create_branch = after(catalog.create_branch, marker, nth)  # type: ignore[method-assign]
    elif step == "after_append":  # written and measured, not yet audited (one file, or the accepted ones of a group)
        appended = after(lambda call, *a, **k: call(*a, **k), marker, nth)
        writer.append = lambda *a, _f=writer.append, **k: appended(_f, *a, **k)  # type: ignore[method-assign]
        stage = writer.stage

        def staged(*args: Any, **kwargs: Any) -> Any:
            files = stage(*args, **kwargs)
            files.append = lambda *a, _f=files.append, **k: appended(_f, *a, **k)  # type: ignore[method-assign]
            return files

        writer.stage = staged  # type: ignore[method-assign]
    elif step == "after_audit":  # the audit passed: the next call is the merge
        catalog.merge = before(catalog.merge, marker, nth)  # type: ignore[method-assign]
    elif step == "after_merge":  # merged, the branch not yet deleted
        catalog.merge = after(catalog.merge, marker, nth)  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown step {step!r}")
    service.ingest_all([Item(SourceObject(bucket, key)) for key in keys])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
