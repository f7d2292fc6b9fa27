"""The README's benchmark figures, rewritten from the report `make bench` just wrote (latest.md), between two
markers, so that every figure there comes from the committed results file:

    <!-- bench:results:start --> ... <!-- bench:results:end -->
"""

from __future__ import annotations

from pathlib import Path

START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


def section_from(report_markdown: str, source: str) -> str:
    """latest.md's body, its headings two levels down (they sit under the README's `## Benchmarks`)."""
    lines = report_markdown.strip().splitlines()
    title, body = lines[0].removeprefix("# "), lines[1:]
    demoted = [f"##{line}" if line.startswith("## ") else line for line in body]
    return "\n".join([f"From `{source}` ({title[:1].lower()}{title[1:]}):", *demoted])


def update(readme: Path, report_markdown: str, source: str = "benchmarks/results/latest.md") -> bool:
    """Replace what is between the markers; False (and nothing written) if the README has no markers."""
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return False
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{section_from(report_markdown, source)}\n{END}{tail}", encoding="utf-8")
    return True
