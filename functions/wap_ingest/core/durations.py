"""Durations an operator types (`30m`, `12h`, `7d`, `2w`) and the ages the commands print."""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import ConfigError

UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_DURATION = re.compile(r"(\d{1,6})([mhdw])")


def parse_duration(text: str, *, option: str = "--older-than") -> timedelta:
    """`7d` -> 7 days. A whole number and one unit: m (minutes), h (hours), d (days), w (weeks)."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ConfigError(
            f"{option} {text!r} is not a duration. Fix: a whole number and a unit, m (minutes), h (hours), "
            f"d (days) or w (weeks), e.g. 30m, 12h, 7d, 2w."
        )
    number, unit = match.groups()
    return int(number) * UNITS[unit]


def format_age(age: timedelta) -> str:
    """The largest two units: `3d 4h`, `5h 12m`, `42m`, `<1m`."""
    minutes = int(age.total_seconds() // 60)
    if minutes < 1:
        return "<1m"
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    return " ".join(parts[:2])
