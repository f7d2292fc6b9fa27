"""The stack's keeper: a process of the stack that looks at its parts every `--every` seconds and starts again, on its
own store, any that is not running (wap_stack/heal.py: the queue server, Nessie, the Slack sink, a worker with its
environment, the EMR runner), as Lambda and S3 heal themselves in AWS. `wap stack up` starts it last; `wap stack
down` stops it first (before anything it could restart), and it restarts nothing while <state dir>/stopping exists.

A part whose start fails is tried again after a back-off that doubles up to `MAX_BACKOFF` seconds; the failure is in
the record (`restarts.<name>`), so `wap stack status` names it. When moto is gone, so is the lake: the keeper says so
once in its log and restarts nothing (only `down`, then `up`, helps).

    python -m wap_stack.keeper --state-dir DIR [--every 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from wap_ingest.core.errors import ConfigError
from wap_stack.config import StackConfig
from wap_stack.daemon import Control, log, stop_on_signals
from wap_stack.heal import down_parts, heal, lake_lost
from wap_stack.state import read_record

MAX_BACKOFF = 60.0
CRASH_LOOP_SECONDS = 30.0  # a part down again this soon after its restart is crashing as it starts



def watch(config: StackConfig, every: float) -> None:
    backoff: dict[str, float] = {}  # name -> seconds to wait after its last failed start (or crash soon after one)
    next_try: dict[str, float] = {}
    started: dict[str, float] = {}  # name -> when the keeper last started it
    said_lost = False
    while Control.running:
        time.sleep(every)
        if config.stopping_file.exists() or not config.state_file.exists():
            continue
        try:
            record = read_record(config)
        except ConfigError:
            continue
        if record is None or not record.get("complete"):
            continue
        lost = lake_lost(record)
        if lost:
            if not said_lost:
                log("lake_lost", reason=lost)
                said_lost = True
            continue
        now = time.monotonic()
        down = [n for n in down_parts(record) if next_try.get(n, 0.0) <= now]
        if not down:
            continue
        log("parts_down", parts=down)
        for name in down:  # down again soon after a restart: a part that crashes as it starts waits longer each time
            if now - started.get(name, -CRASH_LOOP_SECONDS) < CRASH_LOOP_SECONDS:
                backoff[name] = min(2 * backoff.get(name, 1.0), MAX_BACKOFF)
        down = [n for n in down if not (n in backoff and now - started.get(n, -CRASH_LOOP_SECONDS)
                                         < CRASH_LOOP_SECONDS + backoff[n])]
        if not down:
            continue
        try:
            healed = heal(config, keeper=False, wait=False, by="keeper",
                          log=lambda line: log("heal", detail=line))
        except ConfigError as exc:
            log("heal_refused", error=str(exc))
            continue
        for part in healed:
            if part.pid is None:
                backoff[part.name] = min(2 * backoff.get(part.name, 1.0), MAX_BACKOFF)
                next_try[part.name] = time.monotonic() + backoff[part.name]
                log("restart_failed", part=part.name, error=part.error, retry_in=backoff[part.name])
            else:
                started[part.name] = time.monotonic()
                next_try.pop(part.name, None)
                log("restarted", part=part.name, pid=part.pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Restart a crashed part of the local stack on its own store")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between looks")
    args = parser.parse_args(argv)
    stop_on_signals()
    config = StackConfig(state_dir=args.state_dir)
    log("started", state_dir=str(args.state_dir), every=args.every)
    watch(config, args.every)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
