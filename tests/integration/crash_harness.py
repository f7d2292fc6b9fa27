"""Run the real pipeline for one object in this process, and stop dead at a chosen step so the test can
SIGKILL the process there (a real kill: nothing in the product's code path knows about it).

    python -m tests.integration.crash_harness STEP BUCKET KEY MARKER_FILE

STEP: after_branch | after_append | after_audit | after_merge. At the step the process writes MARKER_FILE
and sleeps until it is killed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wap_ingest.bootstrap import build_service
from wap_ingest.config import Settings
from wap_ingest.core.models import SourceObject


def stop_here(marker: Path) -> None:
    marker.write_text("reached")
    while True:
        time.sleep(60)


def after(call: Callable[..., Any], marker: Path) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        stop_here(marker)
        return result

    return wrapped


def before(call: Callable[..., Any], marker: Path) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        stop_here(marker)
        return call(*args, **kwargs)

    return wrapped


def main(step: str, bucket: str, key: str, marker_file: str) -> int:
    marker = Path(marker_file)
    service = build_service(Settings.from_env())
    catalog, writer = service.ports.catalog, service.ports.writer
    if step == "after_branch":
        catalog.create_branch = after(catalog.create_branch, marker)  # type: ignore[method-assign]
    elif step == "after_append":
        writer.append = after(writer.append, marker)  # type: ignore[method-assign]
    elif step == "after_audit":  # the audit passed: the next call is the merge
        catalog.merge = before(catalog.merge, marker)  # type: ignore[method-assign]
    elif step == "after_merge":  # merged, the branch not yet deleted
        catalog.merge = after(catalog.merge, marker)  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown step {step!r}")
    service.ingest(SourceObject(bucket, key))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:5]))
