"""core.columns: the names Spark cannot address, each named with its position and the fix."""

from __future__ import annotations

import pytest

from wap_ingest.core.columns import column_problems


def test_addressable_names_have_no_problem() -> None:
    assert column_problems(["id", "name", "Amount_EUR", "a b", "ünïcode", "ß"]) == []


@pytest.mark.parametrize(
    ("names", "phrases"),
    [
        (["id", "a.b"], ["column 2 ('a.b')", "dot", "'a_b'"]),
        (["id", "a`b"], ["column 2 ('a`b')", "backtick", "'ab'"]),
        (["id", "", "name"], ["column 2 has an empty name", "Fix:"]),
        (["id", "  "], ["column 2 has an empty name"]),
        (["id", "name", "name"], ["column 3 ('name') repeats column 2", "Fix:"]),
        (["id", "Name", "name"], ["column 3 ('name') differs only in case from column 2 ('Name')", "Fix:"]),
    ],
)
def test_each_unaddressable_name_is_one_problem_naming_the_column_and_the_fix(
    names: list[str], phrases: list[str]
) -> None:
    problems = column_problems(names)
    assert len(problems) == 1, problems
    for phrase in phrases:
        assert phrase in problems[0]


def test_every_problem_is_reported_in_header_order() -> None:
    problems = column_problems(["a.b", "x", "X", "", "x", "c`d"])
    assert [p.split(" ")[1] for p in problems] == ["1", "3", "4", "5", "6"]
    assert "repeats column 2" in problems[3]  # the exact duplicate wins over the case-only one
