"""The step profile's stopwatch (benchmarks/step_profile.Steps): a step's time is exclusive of the wrapped steps
inside it, each call is counted, and `restore` leaves every wrapped object as it was."""

from __future__ import annotations

import time
import types

from benchmarks.step_profile import Steps


class Writer:
    def write(self) -> str:
        time.sleep(0.01)
        return self.commit()

    def commit(self) -> str:
        time.sleep(0.1)
        return "done"


def test_steps_are_exclusive_counted_and_restored() -> None:
    module = types.SimpleNamespace(read=lambda: time.sleep(0.01))
    writer = Writer()
    original_read = module.read
    steps = Steps()
    steps.wrap(Writer, "write", "write")
    steps.wrap(writer, "commit", "commit")
    steps.wrap(module, "read", "read")
    steps.wrap(module, "absent", "never")  # nothing to wrap: ignored
    module.read()
    assert writer.write() == "done"
    spent, calls = steps.take()
    assert calls == {"read": 1, "write": 1, "commit": 1}
    assert spent["commit"] >= 0.1 and 0.01 <= spent["write"] < spent["commit"]  # write without its commit
    assert steps.take() == ({}, {})  # taken: the next file starts from nothing
    steps.restore()
    assert Writer.write.__name__ == "write" and "commit" not in vars(writer) and module.read is original_read
