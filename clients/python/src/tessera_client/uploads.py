"""Whole files as FileChunk streams (UploadFile RPCs), and DICOM series as zips.

A DICOM series given as a directory or a list of files is zipped into a
temporary file first (the server reads a zipped series like a directory), so
the upload is one file of known size that can be re-sent on a retry.
"""

import contextlib
import os
import tempfile
import zipfile
from typing import Callable, Iterator, List, Optional, Sequence, Union

CHUNK_BYTES = 1 << 20  # 1 MiB: well under the server's message limit

PathLike = Union[str, os.PathLike]


def file_chunks(path: PathLike, filename: str, chunk_pb_class,
                on_bytes: Optional[Callable[[int], None]] = None) -> Iterator:
    """FileChunk messages of the file at `path`, in order; the first names it as
    `filename` and gives its size. `on_bytes(n)` is called after each chunk."""
    total = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while True:
            data = f.read(CHUNK_BYTES)
            if not data and offset > 0:
                break
            chunk = chunk_pb_class(offset=offset, data=data)
            if offset == 0:
                chunk.filename = filename
                chunk.total_bytes = total
            yield chunk
            offset += len(data)
            if on_bytes:
                on_bytes(len(data))
            if not data:  # an empty file is one chunk naming it
                break


def _series_files(source: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(source, (str, os.PathLike)):
        files = []
        for dirpath, dirnames, names in os.walk(source):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            files.extend(os.path.join(dirpath, n) for n in sorted(names) if not n.startswith("."))
        if not files:
            raise ValueError(f"path: the DICOM series directory {os.fspath(source)!r} holds no files")
        return files
    files = [os.fspath(p) for p in source]
    if not files:
        raise ValueError("paths: an empty list of DICOM files")
    for f in files:
        if not os.path.isfile(f):
            raise FileNotFoundError(f"paths: {f!r} is not a file")
    return files


@contextlib.contextmanager
def zipped_series(source: Union[PathLike, Sequence[PathLike]]):
    """Yields the path of a temporary zip of a DICOM series (a directory, walked
    recursively without hidden entries, or a list of files), removed afterwards.
    Stored, not deflated: DICOM pixel data rarely compresses and zipping stays
    as fast as copying."""
    files = _series_files(source)
    base = os.fspath(source) if isinstance(source, (str, os.PathLike)) else os.path.commonpath(
        [os.path.dirname(os.path.abspath(f)) for f in files])
    fd, tmp = tempfile.mkstemp(prefix="tessera-series-", suffix=".zip")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            used = set()
            for f in files:
                arcname = os.path.relpath(os.path.abspath(f), os.path.abspath(base))
                if arcname.startswith("..") or arcname in used:
                    arcname = f"{len(used):05d}_{os.path.basename(f)}"
                used.add(arcname)
                z.write(f, arcname)
        yield tmp
    finally:
        os.unlink(tmp)
