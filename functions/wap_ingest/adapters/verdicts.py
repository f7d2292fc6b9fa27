"""A verdict: what one failure of an outside system means to the service, shared by the error tables of
adapters/aws_errors.py (AWS) and adapters/nessie_errors.py (Nessie HTTP)."""

from __future__ import annotations

from dataclasses import dataclass

from wap_ingest.core.errors import WapError


@dataclass(frozen=True)
class Verdict:
    """The project's error class for a failure, what happened in words, and the fix ("" when the caller gives it)."""

    error: type[WapError]
    meaning: str
    fix: str = ""

    def raised(self, where: str, answer: str, **values: str) -> WapError:
        """`<where>: <meaning>; <what the system answered>. Fix: <fix>.`, with `{name}` in meaning and fix filled
        from `values`."""
        meaning, fix = self.meaning.format(**values), self.fix.format(**values)
        text = f"{where}: {meaning}; {answer}."
        return self.error(f"{text} Fix: {fix}." if fix else text)
