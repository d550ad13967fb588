"""Start writeback of a file's pages while it is still being written, so its final fsync finds little left.

Linux's sync_file_range(SYNC_FILE_RANGE_WRITE) queues the dirty pages of a byte range for writeback and
returns; the disk writes the copy's first gigabyte while the kernel still reads the source's second, where
`cp && sync` (and a plain write-then-fsync) reads everything first and writes everything after. Python's os
module does not wrap it, so it is called through libc; where it is missing (not Linux, no libc symbol, a
filesystem that refuses it) `Writeback` does nothing and the fsync at the end does all the work, as before;
EAGLE3_CONVERT_NO_WRITEBACK=1 asks for that too (benchmarks/durable.py times both).

It is a hint for speed only: it gives no durability guarantee (no metadata, no disk-cache flush). Durability
still comes from the fsync of every file, the fsync of the temp dir and of the parent around the rename
(eagle3_convert/atomic.py), all unchanged: see the note there. The small files beside the weights (an index,
config.json, the sidecar) are written and fsynced by `write_durably`.
"""

from __future__ import annotations

import os
import sys

SYNC_FILE_RANGE_WRITE = 2
# How much is written before its writeback is started: large enough that the call is rare (a few syscalls
# per GB), small enough that the disk starts early and the dirty pages never pile up into one burst.
WINDOW = 32 * 1024 * 1024

_sync_file_range = None  # the libc function, or False once known to be unavailable


def _libc_sync_file_range():
    global _sync_file_range
    if _sync_file_range is None:
        _sync_file_range = False
        if sys.platform.startswith("linux") and os.environ.get("EAGLE3_CONVERT_NO_WRITEBACK") != "1":
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).sync_file_range
                fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
                fn.restype = ctypes.c_int
                _sync_file_range = fn
            except (OSError, AttributeError):  # no libc symbol (old glibc, musl without it)
                pass
    return _sync_file_range


class Writeback:
    """Tracks how far `fd` has been written (sequentially, from 0) and starts writeback window by window."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.written = 0  # bytes written so far
        self.started = 0  # bytes whose writeback has been started
        self.fn = _libc_sync_file_range()

    def advance(self, nbytes: int) -> None:
        self.written += nbytes
        if self.fn and self.written - self.started >= WINDOW:
            self._start(self.written)

    def _start(self, upto: int) -> None:
        if self.fn(self.fd, self.started, upto - self.started, SYNC_FILE_RANGE_WRITE) != 0:
            self.fn = None  # EINVAL/ESPIPE/ENOSYS: this file cannot; the final fsync still writes it all
            return
        self.started = upto


def write_durably(path: str | os.PathLike, data: bytes) -> None:
    """Write a small file and fsync it: the temp dir's fsync makes its entry durable, not its bytes, and a crash
    after the rename must not leave an empty index or config.json."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
