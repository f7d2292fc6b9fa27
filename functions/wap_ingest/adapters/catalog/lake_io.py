"""The FileIO the register path's table commits write through (catalog.tables.BranchTables): PyIceberg's PyArrow FileIO,
but each file the commit writes, a manifest, a manifest list, a metadata file (a few kilobytes each), is one S3
PutObject made when the file is closed.

PyArrow's S3 output stream uploads every file as a multipart upload (three requests), and PyIceberg then asks the
manifest's length with a HEAD and checks a metadata file's absence with another: five round trips per file where one
does, about 70 ms of a registered file's 0.34 s against the local stack (benchmarks/step_profile.py). Here the bytes
are kept in memory until `close`, the length is known without asking, and "do not overwrite" is S3's own
conditional put (If-None-Match: *), not a HEAD before the write (a race the check could lose). Reads and deletes
stay PyArrow's.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

Put = Callable[..., None]  # (uri, data, *, overwrite) -> None: adapters.s3.S3ObjectStore.write


def put_file_io(properties: dict[str, str], put: Put) -> Any:
    """A PyArrow FileIO whose new files on S3 are each written with one `put`."""
    from pyiceberg.io import OutputFile
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class _Buffered(io.BytesIO):
        def __init__(self, file: _PutFile, overwrite: bool) -> None:
            super().__init__()
            self._file, self._overwrite = file, overwrite

        def close(self) -> None:
            if not self.closed:
                data = self.getvalue()
                put(self._file.location, data, overwrite=self._overwrite)
                self._file.written = len(data)
            super().close()

    class _PutFile(OutputFile):
        def __init__(self, location: str, io_: PyArrowFileIO) -> None:
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
        def new_output(self, location: str) -> Any:
            if not location.startswith("s3://"):
                return super().new_output(location)
            return _PutFile(location, self)

    return _PutFileIO(properties)
