"""benchmarks/engines.py: two engines' interleaved bench runs summed up per target: each run's value per tree, the
medians, the second's median over the first's, and whether the two trees' values overlap (within this run's noise)."""

from __future__ import annotations

from typing import Any

from benchmarks.engines import summary


def report(**values: float | None) -> dict[str, Any]:
    return {"targets": [{"name": name, "target": "<= 1.0", "value": value} for name, value in values.items()]}


def test_a_target_is_compared_by_medians_and_its_spread() -> None:
    runs = {"old": [report(a=1.0, b=2.0, c=None), report(a=1.2, b=2.2, c=None)],
            "new": [report(a=1.1, b=4.0, c=3.0), report(a=1.3, b=4.4, c=None)]}
    found = summary(runs)
    assert found["a"]["old"] == {"values": [1.0, 1.2], "median": 1.1, "min": 1.0, "max": 1.2}
    assert found["a"]["second_vs_first"] == 1.091 and found["a"]["overlap"] is True
    assert found["b"]["second_vs_first"] == 2.0 and found["b"]["overlap"] is False  # moved beyond the noise
    assert "second_vs_first" not in found["c"]  # measured by one tree only: no ratio
    assert found["c"]["new"]["median"] == 3.0 and found["c"]["target"] == "<= 1.0"
