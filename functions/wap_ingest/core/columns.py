"""Column names the engine cannot address, found before any data is read (issue 13, item 4).

Spark resolves `a.b` as the field `b` of a struct `a`, cannot quote a name holding a backtick in every place it
builds SQL, renames an empty CSV header to `_c<i>` and duplicates to `<name><i>` (silently, so the table would get
columns the producer never wrote), and compares names case-insensitively (`spark.sql.caseSensitive` is off), so
`Name` and `name` are one column to it. A file with such a header is the file's fault: INVALID, with the column
and the fix, before Spark touches it.
"""

from __future__ import annotations

from collections.abc import Sequence


def column_problems(names: Sequence[str]) -> list[str]:
    """One line per problem, in header order; each names the column (1-based position and name) and the fix.
    An empty list means every name is addressable."""
    problems: list[str] = []
    first_exact: dict[str, int] = {}
    first_folded: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        where = f"column {position} ({name!r})"
        if not name.strip():
            problems.append(f"column {position} has an empty name. Fix: give it a name in the header row")
            continue
        if "." in name:
            problems.append(f"{where} contains a dot, which Spark reads as a struct field. "
                            f"Fix: rename it, e.g. {name.replace('.', '_')!r}")
        if "`" in name:
            problems.append(f"{where} contains a backtick, which Spark cannot quote. "
                            f"Fix: rename it, e.g. {name.replace('`', '')!r}")
        folded = name.lower()  # as Spark folds names (toLowerCase)
        if name in first_exact:
            problems.append(f"{where} repeats column {first_exact[name]}. Fix: give each column its own name")
        elif folded in first_folded:
            other = first_folded[folded]
            problems.append(f"{where} differs only in case from column {other} ({names[other - 1]!r}), and "
                            f"Spark compares names ignoring case. Fix: give each column a name of its own")
        first_exact.setdefault(name, position)
        first_folded.setdefault(folded, position)
    return problems
