"""The FileIO the register path's table commits write through (catalog.tables.BranchTables): PyIceberg's PyArrow FileIO,
but each file the commit writes, a manifest, a manifest list, a metadata file (a few kilobytes each), is one S3
PutObject made when the file is closed.

PyArrow's S3 output stream uploads every file as a multipart upload (three requests), and PyIceberg then asks the
manifest's length with a HEAD and checks a metadata file's absence with another: five round trips per file where one
does, about 70 ms of a registered file's 0.34 s against the local stack (benchmarks/step_profile.py). Here the bytes
are kept in memory until `close`, the length is known without asking, and "do not overwrite" is S3's own
conditional put (If-None-Match: *), not a HEAD before the write (a race the check could lose). Reads and deletes
stay PyArrow's.

The put starts when the file is closed and runs beside what the commit writes next (a data file, its manifest, the
manifest list, the metadata file: four puts at once rather than one after the other); `settle` waits for every put
started and raises the first failure, and the commit calls it before the catalog commit that makes the files
reachable (catalog.tables), so a table never points at a file that is not written. `drain` forgets the puts of an
attempt that never reached its commit (a new transaction starts with none).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

Put = Callable[..., None]  # (uri, data, *, overwrite) -> None: adapters.s3.S3ObjectStore.write
_PUTS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lake-put")  # shared: a commit writes a few files


class Puts:
    """The puts a FileIO started and nobody waited for yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: list[Future[None]] = []

    def start(self, put: Callable[[], None]) -> None:
        with self._lock:
            self._started.append(_PUTS.submit(put))

    def settle(self) -> None:
        """Wait for every put started; raise the first failure (all of them ended by then)."""
        with self._lock:
            started, self._started = self._started, []
        wait(started)
        for future in started:
            failure = future.exception()
            if failure is not None:
                raise failure

    def drain(self) -> None:
        """Wait for every put started and forget their failures (an attempt that ended before its commit)."""
        with self._lock:
            started, self._started = self._started, []
        wait(started)


def put_file_io(properties: dict[str, str], put: Put) -> Any:
    """A PyArrow FileIO whose new files on S3 are each written with one `put`, started on close (its `puts`)."""
    from pyiceberg.io import OutputFile
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class _Buffered(io.BytesIO):
        def __init__(self, file: _PutFile, overwrite: bool) -> None:
            super().__init__()
            self._file, self._overwrite = file, overwrite

        def close(self) -> None:
            if not self.closed:
                data, location, overwrite = self.getvalue(), self._file.location, self._overwrite
                self._file._io.puts.start(lambda: put(location, data, overwrite=overwrite))
                self._file.written = len(data)
            super().close()

    class _PutFile(OutputFile):
        def __init__(self, location: str, io_: _PutFileIO) -> None:
            super().__init__(location)
            self._io, self.written = io_, -1

        def __len__(self) -> int:
            return self.written if self.written >= 0 else len(self.to_input_file())

        def exists(self) -> bool:
            return bool(self.to_input_file().exists())

        def to_input_file(self) -> Any:
            return self._io.new_input(self.location)

        def create(self, overwrite: bool = False) -> Any:
            return _Buffered(self, overwrite)

    class _PutFileIO(PyArrowFileIO):
        def __init__(self, properties: dict[str, str]) -> None:
            super().__init__(properties)
            self.puts = Puts()

        def new_output(self, location: str) -> Any:
            if not location.startswith("s3://"):
                return super().new_output(location)
            return _PutFile(location, self)

    return _PutFileIO(properties)
