"""A run's deadline inside the engine's long steps: staging a file and Spark's jobs.

`within(spark, out_of_time, doing)` runs its block in a Spark job group of its own and watches `out_of_time` from a
thread: when it turns true, the group's jobs are cancelled (their tasks interrupted) and the staging in progress stops
at its next part, and the block's failure becomes an OutOfTimeError (deferred: the file goes back to the queue, not
started as far as anyone can see, since the transaction deletes the attempt's branch). So an invocation hands its
unfinished files back before Lambda kills it, instead of losing the whole batch's answer."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from wap_ingest.core.errors import OutOfTimeError

POLL_SECONDS = 0.5


class Deadline:
    """What the watched block sees: whether the deadline fired (a staging loop checks it between parts)."""

    def __init__(self) -> None:
        self._fired = threading.Event()

    def passed(self) -> bool:
        return self._fired.is_set()

    def fire(self) -> None:
        self._fired.set()


@contextlib.contextmanager
def within(spark: Any | None, out_of_time: Callable[[], bool] | None, doing: str) -> Iterator[Deadline]:
    """`spark` None: a block that runs no Spark job (a registration without the engine): only staging is stopped."""
    deadline = Deadline()
    if out_of_time is None:
        yield deadline
        return
    context, group = None if spark is None else spark.sparkContext, f"wap-{uuid.uuid4().hex[:12]}"
    if context is not None:
        context.setJobGroup(group, doing, interruptOnCancel=True)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(POLL_SECONDS):
            if out_of_time():
                deadline.fire()
                if context is not None:
                    with contextlib.suppress(Exception):  # a dead engine has no job to cancel
                        context.cancelJobGroup(group)
                return

    watcher = threading.Thread(target=watch, name="wap-deadline", daemon=True)
    watcher.start()
    try:
        yield deadline
    except Exception as exc:
        if deadline.passed():
            raise OutOfTimeError(f"{doing}: stopped, the invocation is nearly out of time; nothing was published and "
                                 f"the file goes back to the queue.") from exc
        raise
    finally:
        stop.set()
        watcher.join()
        if context is not None:
            with contextlib.suppress(Exception):
                context.setLocalProperty("spark.jobGroup.id", None)
                context.setLocalProperty("spark.job.description", None)
                context.setLocalProperty("spark.job.interruptOnCancel", None)
    if deadline.passed():  # it fired as the block ended: the block's result is not trusted to have been complete
        raise OutOfTimeError(f"{doing}: the invocation ran out of time as it ended; the file goes back to the queue.")
