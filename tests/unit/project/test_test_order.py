"""The suite's own schedule (Makefile `test`, tests/conftest.py): workers take whole files, the slowest first by
tests/durations.json, so that no long file starts while the other workers run out of work; lint, types and the
image test run beside pytest and fail the command like a test does."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tests import conftest
from tests.paths import ROOT


@dataclass
class Item:
    nodeid: str


def test_files_are_collected_slowest_first_and_each_files_tests_keep_their_order() -> None:
    seconds = json.loads(conftest.DURATIONS.read_text())
    slow, slower = sorted(seconds, key=seconds.get)[-2:]
    items = [Item("tests/unit/new_file.py::t"), Item(f"{slow}::a"), Item(f"{slower}::b"), Item(f"{slow}::c"),
             Item(f"{slower}::d")]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [f"{slower}::b", f"{slower}::d", f"{slow}::a", f"{slow}::c",
                                         "tests/unit/new_file.py::t"]


def test_the_durations_name_only_test_files_and_the_slowest_file_is_listed() -> None:
    seconds = json.loads(conftest.DURATIONS.read_text())
    assert len(seconds) >= 20 and all(p.startswith("tests/") and p.endswith(".py") for p in seconds)
    assert "tests/e2e/test_scale_out.py" in seconds


def test_make_test_keeps_the_collection_order_and_fails_on_the_side_jobs() -> None:
    recipe = re.search(r"^test: .*?\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None
    body = recipe.group(1)
    # xdist's default hands out the files with the most tests first: the slow files with few tests ran last
    assert "--dist loadfile --no-loadscope-reorder" in body
    assert "lint image-test" in body and "[ $$tests -eq 0 ] && [ $$side -eq 0 ]" in body
