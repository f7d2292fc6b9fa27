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

The manifests and manifest lists a put wrote are kept in memory by location (`Written`: at most KEPT_BYTES, the
oldest forgotten; none larger than KEEP_AT_MOST): the next commit to the table reads its parent snapshot's manifest
list, which this process wrote one commit earlier, and read from S3 that was a GET and an Avro parse in every commit
(5 to 15 ms of a small registered file's data commit and as much of its results', profiled). Only bytes this process
put, after S3 took them, are kept, and a location is kept with the bytes last put there: PyIceberg names each such
file by a fresh UUID and never writes one twice, so the object at that location is the bytes kept.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

Put = Callable[..., None]  # (uri, data, *, overwrite) -> None: adapters.s3.S3ObjectStore.write
_PUTS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lake-put")  # shared: a commit writes a few files
KEPT_BYTES = 16 * 1024 * 1024  # the bytes of written manifests and manifest lists kept in memory, per FileIO
KEEP_AT_MOST = 1024 * 1024  # a larger file is not kept
KEPT_SUFFIX = ".avro"  # manifests and manifest lists (a metadata file is kept parsed, by catalog.tables)


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


class Written:
    """The bytes this process put at each location, for the files worth keeping (see the module docstring)."""

    def __init__(self, budget: int = KEPT_BYTES, largest: int = KEEP_AT_MOST) -> None:
        self._budget, self._largest, self._held = budget, largest, 0
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, bytes] = OrderedDict()

    def keep(self, location: str, data: bytes) -> None:
        """`data` is what S3 now holds at `location` (kept if worth it; anything kept there before is forgotten)."""
        with self._lock:
            self._held -= len(self._kept.pop(location, b""))
            if not location.endswith(KEPT_SUFFIX) or len(data) > self._largest:
                return
            self._kept[location] = data
            self._held += len(data)
            while self._held > self._budget:
                self._held -= len(self._kept.popitem(last=False)[1])

    def get(self, location: str) -> bytes | None:
        with self._lock:
            return self._kept.get(location)

    def forget(self, location: str) -> None:
        with self._lock:
            self._held -= len(self._kept.pop(location, b""))


def put_file_io(properties: dict[str, str], put: Put) -> Any:
    """A PyArrow FileIO whose new files on S3 are each written with one `put`, started on close (its `puts`)."""
    from pyiceberg.io import InputFile, InputStream, OutputFile
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class _Buffered(io.BytesIO):
        def __init__(self, file: _PutFile, overwrite: bool) -> None:
            super().__init__()
            self._file, self._overwrite = file, overwrite

        def close(self) -> None:
            if not self.closed:
                data, location, overwrite = self.getvalue(), self._file.location, self._overwrite
                written = self._file._io.written

                def send() -> None:
                    put(location, data, overwrite=overwrite)
                    written.keep(location, data)  # once S3 has taken them

                self._file._io.puts.start(send)
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

    class _KeptFile(InputFile):
        def __init__(self, location: str, data: bytes) -> None:
            super().__init__(location)
            self._data = data

        def __len__(self) -> int:
            return len(self._data)

        def exists(self) -> bool:
            return True

        def open(self, seekable: bool = True) -> InputStream:
            return io.BytesIO(self._data)

    class _PutFileIO(PyArrowFileIO):
        def __init__(self, properties: dict[str, str]) -> None:
            super().__init__(properties)
            self.puts, self.written = Puts(), Written()

        def new_input(self, location: str) -> Any:
            kept = self.written.get(location)
            return super().new_input(location) if kept is None else _KeptFile(location, kept)

        def delete(self, location: str | InputFile | OutputFile) -> None:
            self.written.forget(location if isinstance(location, str) else location.location)
            super().delete(location)

        def new_output(self, location: str) -> Any:
            if not location.startswith("s3://"):
                return super().new_output(location)
            return _PutFile(location, self)

    return _PutFileIO(properties)
