"""The atomic directory writer: a checkpoint is written into a locked temp dir beside its
destination, fsynced, and swapped into place in one step, so a reader (or a crash) sees either
the old directory or the complete new one, never a half-written one."""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import DestinationError
from .safetensors_io import TensorSource, write_tensor_files

try:
    import fcntl
except ImportError:  # not POSIX: no temp-dir locks, so a dead writer's temp dir is left for the user
    fcntl = None

CONFIG_NAME = "config.json"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_destination(dest: Path, src: Path | None, force: bool) -> None:
    dest_abs = dest.resolve()
    if src is not None:
        src_abs = src.resolve()
        if dest_abs == src_abs or src_abs in dest_abs.parents or dest_abs in src_abs.parents:
            raise DestinationError(f"destination {dest} overlaps the source {src}",
                                   "write to a separate directory; the source is never modified")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise DestinationError(f"destination {dest} exists and is not a directory",
                               "choose a new directory name")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise DestinationError(f"destination {dest} is not empty", "pass --force to replace it, or choose a new path")
    if dest_abs.parent.exists() and not dest_abs.parent.is_dir():
        raise DestinationError(f"{dest_abs.parent} is not a directory", "choose a destination inside a directory")


def write_directory(dest: Path, config: Mapping[str, Any], tensors: Mapping[str, TensorSource],
                    extra_files: Mapping[str, bytes] | Callable[[], Mapping[str, bytes]], *,
                    src: Path | None, force: bool,
                    max_shard_bytes: int | None = None,
                    on_progress: Callable[[int], None] | None = None) -> list[str]:
    """Write a checkpoint into a temporary directory beside `dest`, then rename it into place.

    `extra_files` may be a function: it is called once the weights are written (files that
    describe the weights, e.g. a sidecar holding their digest, can then be completed).
    """
    dest = Path(dest)
    check_destination(dest, src, force)
    try:
        dest.resolve().parent.mkdir(parents=True, exist_ok=True)
        _remove_dead_temp_dirs(dest.resolve().parent, dest.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.resolve().parent))
        lock = _lock_dir(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result should not be
    except OSError as exc:
        raise DestinationError(f"cannot write beside {dest}: {exc.strerror or exc}",
                               "check permissions and free space of the destination's parent") from None
    try:
        files = write_tensor_files(tmp, tensors, {"format": "pt"}, max_shard_bytes, on_progress)
        extra = extra_files() if callable(extra_files) else extra_files
        for name, data in {CONFIG_NAME: json_bytes(config), **extra}.items():
            (tmp / name).write_bytes(data)
            files.append(name)
        _fsync_dir(tmp)
        _swap_into_place(tmp, dest, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(lock)
    _fsync_dir(dest.resolve().parent)
    return files


def _lock_dir(path: Path) -> int:
    """Hold an exclusive flock on a temp dir while writing into it: the kernel drops it when the
    writer dies (even by SIGKILL), which is how a later writer tells a dead temp dir from a live one."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocking: a cleaner may hold it for an instant while it looks
    return fd


def _remove_dead_temp_dirs(parent: Path, name: str) -> None:
    """Remove `.{name}.tmp-*` dirs left by writers that died. A live writer locks its temp dir before
    putting anything in it, so unlocked and non-empty means dead; unlocked and empty may be a writer
    between mkdtemp and its lock, and is left alone."""
    if fcntl is None:
        return
    for path in parent.glob(f".{glob.escape(name)}.tmp-*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if any(path.iterdir()):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # locked by a live writer, or renamed into place meanwhile
        finally:
            os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # the filesystem cannot exchange
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def _swap_into_place(tmp: Path, dest: Path, force: bool) -> None:
    old = None
    if dest.is_dir() and force and any(dest.iterdir()):
        # One atomic exchange: a kill at any instant leaves either the old or the new output at dest. The old
        # one is then in our temp dir, unlocked, and the next writer's cleanup removes it if we die here.
        if _exchange(tmp, dest):
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.resolve().parent))
        os.rename(dest, old / "d")
    try:
        os.rename(tmp, dest)  # atomic; fails if another writer already filled dest
    except OSError as exc:
        if old is not None:
            os.rename(old / "d", dest)
            old.rmdir()
        raise DestinationError(f"cannot move the result into {dest}: {exc.strerror or exc}",
                               "another process wrote there at the same time, or it is not writable; retry") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()
