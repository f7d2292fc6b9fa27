"""A local stack of its own (the session's, or one test module's): started with these variables set (and those
unset), stopped and the variables restored after, whatever happened."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.paths import DATA
from wap_stack.stack import StackConfig, free_port_block, free_ports, start_stack, stop_stack
from wap_stack.state import StackState

AUDITS = DATA / "audits.yml"


@contextmanager
def running_stack(config: StackConfig, env: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[StackState]:
    patch = pytest.MonkeyPatch()
    for name, value in env.items():
        patch.setenv(name, value)  # the stack's processes (the function among them) inherit them
    for name in unset:
        patch.delenv(name, raising=False)
    try:
        state = start_stack(config)
        try:
            yield state
        finally:
            stop_stack(config)
    finally:
        patch.undo()


@contextmanager
def crash_stack(folder: Path, *, abandoned: int, visibility: int, env: Mapping[str, str] | None = None
                ) -> Iterator[tuple[StackConfig, StackState]]:
    """A stack of one execution environment on free ports, for the fault tests: a branch a run could not delete
    counts as abandoned after `abandoned` s, a received message comes back after `visibility` s."""
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2, avoid=(moto, nessie, management, slack))
    config = StackConfig(state_dir=folder, moto_port=moto, nessie_port=nessie, nessie_management_port=management,
                         slack_port=slack, lambda_port=function, runtime_port=function + 1,
                         visibility_seconds=visibility)
    variables = {"WAP_AUDITS_FILE": str(AUDITS), "WAP_ABANDONED_BRANCH_SECONDS": str(abandoned), **(env or {})}
    with running_stack(config, variables, unset=("WAP_SOURCE_BUCKETS", "WAP_LARGE_FILE_BYTES",
                                                 "WAP_STACK_VISIBILITY_SECONDS")) as state:
        yield config, state


def small_parquet(rows: int, first: int) -> bytes:
    """`rows` rows (my_col_0 from `first`, my_col_1 its text) as a Parquet file."""
    sink = io.BytesIO()
    pq.write_table(pa.table({"my_col_0": list(range(first, first + rows)),
                             "my_col_1": [f"v{i}" for i in range(first, first + rows)]}), sink)
    return sink.getvalue()
