"""Where things are, for tests in any folder: the repository's root, the tests' folder and its data."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
