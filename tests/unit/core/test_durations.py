"""Durations an operator types, and the ages the commands print."""

from __future__ import annotations

from datetime import timedelta

import pytest

from wap_ingest.core.durations import format_age, parse_duration
from wap_ingest.core.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    ("30m", timedelta(minutes=30)), ("12h", timedelta(hours=12)), ("7d", timedelta(days=7)),
    ("2w", timedelta(weeks=2)), ("0m", timedelta(0)), (" 14D ", timedelta(days=14)),
])
def test_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "7 days", "1.5d", "-3d", "7y", "3d4h"])
def test_refused_with_the_fix(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--older-than .* is not a duration\. Fix: .*30m, 12h, 7d, 2w"):
        parse_duration(text)


@pytest.mark.parametrize(("age", "shown"), [
    (timedelta(seconds=20), "<1m"), (timedelta(minutes=42), "42m"), (timedelta(hours=5, minutes=12), "5h 12m"),
    (timedelta(days=3, hours=4, minutes=9), "3d 4h"), (timedelta(days=15), "15d"),
])
def test_format_age(age: timedelta, shown: str) -> None:
    assert format_age(age) == shown
