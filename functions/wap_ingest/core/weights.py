"""What a file weighs: the bytes the engine will process, not only the bytes the store holds.

A `.csv.gz` that inflates tenfold, a few-kilobyte `.csv.bz2` that inflates to gigabytes, or a Parquet file whose
columns decode to many times its size is routed, budgeted and checked against the local disk by what it becomes
(`Weight.processed`), measured by the store's adapter from the version's own bytes (gzip's trailer and a bounded
probe, bzip2's bounded probe, a Parquet footer's uncompressed sizes). One that inflates beyond the configured ratio is
a decompression bomb: INVALID, never started in the function; one that is legitimately large goes to the distributed
engine like any large file."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UnreadableSourceError
from .models import SourceObject


class DecompressionBombError(UnreadableSourceError):
    """The file inflates beyond the configured ratio (WAP_MAX_INFLATION)."""


@dataclass(frozen=True)
class Weight:
    stored: int  # bytes in the store
    processed: int  # bytes the engine will read once decompressed or decoded
    how: str = "stored size"  # how `processed` was found (for the messages)

    @property
    def ratio(self) -> float:
        return self.processed / self.stored if self.stored else 1.0

    @property
    def local_bytes(self) -> int:
        """What running it here takes on local disk: the staged copy and the engine's scratch for what it reads."""
        return self.stored + self.processed


def unweighed(source: SourceObject) -> Weight:
    return Weight(source.size or 0, source.size or 0)


def check_inflation(source: SourceObject, weight: Weight, max_ratio: float) -> None:
    """Raises DecompressionBombError when the file inflates more than `max_ratio` times."""
    if weight.ratio > max_ratio:
        raise DecompressionBombError(
            f"{source.uri}: it inflates {weight.ratio:.0f} times ({weight.stored} bytes stored, about "
            f"{weight.processed} bytes to read, by its {weight.how}), beyond the limit of {max_ratio:g} "
            f"(WAP_MAX_INFLATION): a decompression bomb is never started; nothing was ingested. Fix: upload it "
            f"uncompressed or in smaller files; if such a ratio is expected, raise WAP_MAX_INFLATION.")
